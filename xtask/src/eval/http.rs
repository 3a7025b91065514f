//! Just enough HTTP to drive `shiitake serve` from the eval: JSON requests and one
//! Server-Sent Events stream, over HTTP/1.0 on 127.0.0.1 (the server closes each
//! connection after its body), with each event stamped when it arrived.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Longest wait for one answer of the model server or of `serve`.
const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// A server on 127.0.0.1 and the bearer token it wants (none for the model server).
#[derive(Clone)]
pub struct Server {
    pub port: u16,
    pub token: Option<String>,
}

fn connect(port: u16) -> Result<TcpStream, String> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|e| format!("connect 127.0.0.1:{port}: {e}"))?;
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .map_err(|e| e.to_string())?;
    Ok(stream)
}

impl Server {
    fn head(&self, method: &str, path: &str, body: &str) -> String {
        let auth = self
            .token
            .as_ref()
            .map(|token| format!("Authorization: Bearer {token}\r\n"))
            .unwrap_or_default();
        format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        )
    }

    /// A request with a JSON body (or none); the answer's JSON when it is a 2xx.
    pub fn json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut stream = connect(self.port)?;
        stream
            .write_all(self.head(method, path, &body).as_bytes())
            .map_err(|e| format!("send {path}: {e}"))?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .map_err(|e| format!("read {path}: {e}"))?;
        let response = String::from_utf8_lossy(&response);
        let (head, body) = response
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("{path}: no HTTP head in {response:.200}"))?;
        if head.get(9..10) != Some("2") {
            return Err(format!("{method} {path}: {head:.100}: {body:.300}"));
        }
        if body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(body).map_err(|e| format!("{path}: not JSON ({e}): {body:.300}"))
    }

    /// Opens an event stream: its events (name, data) arrive on the receiver with the
    /// time each was read; the stream closes when the returned guard is dropped.
    pub fn events(&self, path: &str) -> Result<(Receiver<Event>, EventStream), String> {
        let mut stream = connect(self.port)?;
        stream
            .write_all(self.head("GET", path, "").as_bytes())
            .map_err(|e| format!("send {path}: {e}"))?;
        let reader = stream.try_clone().map_err(|e| e.to_string())?;
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(reader).lines();
            // The head, up to its blank line.
            for line in lines.by_ref() {
                match line {
                    Ok(line) if line.is_empty() => break,
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
            let (mut name, mut data) = (String::new(), String::new());
            for line in lines {
                let Ok(line) = line else { return };
                if line.is_empty() {
                    if !data.is_empty() {
                        let event = Event {
                            at: Instant::now(),
                            name: std::mem::take(&mut name),
                            data: std::mem::take(&mut data),
                        };
                        if sender.send(event).is_err() {
                            return;
                        }
                    }
                    name.clear();
                } else if let Some(value) = line.strip_prefix("event:") {
                    value.trim().clone_into(&mut name);
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.trim_start());
                }
            }
        });
        Ok((receiver, EventStream(stream)))
    }
}

/// One Server-Sent Event and when it was read.
pub struct Event {
    pub at: Instant,
    pub name: String,
    pub data: String,
}

/// An open event stream; dropping it closes the connection (and ends its reader).
pub struct EventStream(TcpStream);

impl Drop for EventStream {
    fn drop(&mut self) {
        let _already_closed_is_fine = self.0.shutdown(Shutdown::Both);
    }
}
