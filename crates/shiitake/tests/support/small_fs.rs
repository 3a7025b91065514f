//! A small real filesystem a test mounts for a data directory, fills and makes refuse
//! writes, and always unmounts: the storage faults of issue 46 on Local.
//!
//! [`SmallFs::tmpfs`] mounts a tmpfs of a given size; [`SmallFs::ext4`] an ext4 image
//! on a loop device, the image kept in a tmpfs of its own (no disk is touched, and the
//! image goes with that tmpfs). A tmpfs is the simple full disk: [`SmallFs::fill`]
//! writes a filler file until `ENOSPC` and keeps it topped up until the [`Filler`] is
//! freed. ext4 is there for [`SmallFs::refuse_writes`]: `chattr +i` on a file, which
//! ext4 enforces on descriptors already open (a write answers `EPERM`; tmpfs ignores
//! the flag for open files). Remounting read-only, the obvious way, is refused
//! (`mount point is busy`) while a process holds a file open for writing, as `serve`
//! holds its database.
//!
//! Mounting needs root. Without it (or without `mkfs.ext4`, `chattr`, a loop device)
//! the test follows `shiitake-test-services`' rule: one loud `SKIPPED` line and the
//! test returns, or a failure when `SHIITAKE_REQUIRE_SERVICES` is set.
//!
//! Dropping a [`SmallFs`] (also while a failed test unwinds) clears the immutable
//! flags it set, stops a filler, and unmounts: plainly, retried for a moment while a
//! killed process lets go of its files, then lazily. Drop the processes that use the
//! filesystem first (declare the `SmallFs` before them).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the rule calls the service, in its lines.
const SERVICE: &str = "A small filesystem of the test's own (tmpfs or an ext4 loop device, \
    mounted as root)";
/// How to provide it, for the lines.
const REMEDY: &str = "run the tests as root (CI does) on a kernel with tmpfs and loop devices, \
    with mount, losetup, mkfs.ext4 and chattr installed (util-linux, e2fsprogs)";

/// A mounted filesystem, unmounted when dropped.
pub struct SmallFs {
    /// Where it is mounted.
    root: PathBuf,
    /// The tmpfs holding an ext4 image, mounted under it; unmounted after `root`.
    backing: Option<PathBuf>,
    /// Files given the immutable flag, cleared on drop.
    immutable: Vec<PathBuf>,
}

impl SmallFs {
    /// A tmpfs of `bytes` mounted at `dir/fs`; `None` after the `SKIPPED` line when it
    /// cannot be mounted (a panic instead under `SHIITAKE_REQUIRE_SERVICES`).
    #[track_caller]
    pub fn tmpfs(dir: &Path, bytes: u64) -> Option<Self> {
        let root = dir.join("fs");
        std::fs::create_dir_all(&root).unwrap();
        match run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={bytes},mode=0755"))
            .arg("tmpfs")
            .arg(&root))
        {
            Ok(()) => Some(Self {
                root,
                backing: None,
                immutable: Vec::new(),
            }),
            Err(why) => missing(&format!("cannot mount a tmpfs: {why}")),
        }
    }

    /// An ext4 filesystem of `bytes` on a loop device, mounted at `dir/fs`, its image in a
    /// tmpfs mounted at `dir/backing`; `None` after the `SKIPPED` line when it cannot be
    /// made (a panic instead under `SHIITAKE_REQUIRE_SERVICES`).
    #[track_caller]
    pub fn ext4(dir: &Path, bytes: u64) -> Option<Self> {
        let backing = dir.join("backing");
        let root = dir.join("fs");
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        if let Err(why) = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={}", bytes + bytes / 8))
            .arg("tmpfs")
            .arg(&backing))
        {
            return missing(&format!("cannot mount a tmpfs for the ext4 image: {why}"));
        }
        // From here on, dropping `fs` unmounts what was mounted.
        let fs = Self {
            root: root.clone(),
            backing: Some(backing.clone()),
            immutable: Vec::new(),
        };
        let image = backing.join("ext4.img");
        File::create(&image).unwrap().set_len(bytes).unwrap();
        // No reserved blocks: the filesystem is full for root as for anyone.
        if let Err(why) = run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0"])
            .arg(&image))
        {
            drop(fs);
            return missing(&format!("cannot make an ext4 filesystem: {why}"));
        }
        if let Err(why) = run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&root))
        {
            drop(fs);
            return missing(&format!(
                "cannot mount an ext4 image on a loop device: {why}"
            ));
        }
        Some(fs)
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Fills the filesystem: writes `filler` until `ENOSPC`, then keeps writing to it
    /// (every few milliseconds, in a thread) so space something else frees is taken at
    /// once, until the returned [`Filler`] is freed or dropped.
    pub fn fill(&self) -> Filler {
        let path = self.root.join("filler");
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let filled = Arc::new(AtomicU64::new(0));
        for chunk in [1 << 20, 4096] {
            top_up(&mut file, chunk, &filled);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let filled = filled.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    top_up(&mut file, 4096, &filled);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        Filler {
            path,
            stop,
            thread: Some(thread),
            filled,
        }
    }

    /// Makes `files` refuse writes, also through descriptors already open: `chattr +i`
    /// (ext4; see the module doc). Undone by [`SmallFs::allow_writes`] or on drop.
    pub fn refuse_writes(&mut self, files: &[PathBuf]) {
        for file in files {
            run(Command::new("chattr").arg("+i").arg(file))
                .unwrap_or_else(|why| panic!("chattr +i {}: {why}", file.display()));
            self.immutable.push(file.clone());
        }
    }

    /// Lets the files [`SmallFs::refuse_writes`] refused take writes again.
    pub fn allow_writes(&mut self) {
        for file in std::mem::take(&mut self.immutable) {
            if let Err(why) = run(Command::new("chattr").arg("-i").arg(&file)) {
                eprintln!("chattr -i {}: {why}", file.display());
            }
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        self.allow_writes();
        for mount in std::iter::once(&self.root).chain(&self.backing) {
            unmount(mount);
        }
    }
}

/// A filler file that keeps its filesystem full until freed.
pub struct Filler {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    filled: Arc<AtomicU64>,
}

impl Filler {
    /// Bytes the filler holds.
    pub fn bytes(&self) -> u64 {
        self.filled.load(Ordering::Relaxed)
    }

    /// Stops topping up and deletes the filler: the space is free again.
    pub fn free(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
            if let Err(error) = std::fs::remove_file(&self.path) {
                eprintln!("removing {}: {error}", self.path.display());
            }
        }
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Appends `chunk`-byte writes to `file` until the filesystem refuses one with
/// `ENOSPC`, counting what landed in `filled`. Any other error is the test's failure.
fn top_up(file: &mut File, chunk: usize, filled: &AtomicU64) {
    let bytes = vec![0x5a_u8; chunk];
    loop {
        match file.write(&bytes) {
            Ok(0) => return,
            Ok(n) => {
                filled.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(error) if error.kind() == ErrorKind::StorageFull => return,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => panic!("writing the filler: {error}"),
        }
    }
}

/// Unmounts `mount`: plainly, retried for up to 5 s while a killed process still holds
/// files there, then lazily (detached now, gone once the last file closes).
fn unmount(mount: &Path) {
    if !is_mount_point(mount) {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match run(Command::new("umount").arg(mount)) {
            Ok(()) => return,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(why) => {
                eprintln!("umount {}: {why}; unmounting lazily", mount.display());
                if let Err(why) = run(Command::new("umount").arg("-l").arg(mount)) {
                    eprintln!("umount -l {}: {why}", mount.display());
                }
                return;
            }
        }
    }
}

/// Whether `path` is a mount point now (a line of `/proc/self/mounts`).
fn is_mount_point(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let wanted = path.display().to_string();
    mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(1))
        .any(|point| point.replace("\\040", " ") == wanted)
}

/// Runs `command`; its stderr (or how it failed to start) when it does not succeed.
fn run(command: &mut Command) -> Result<(), String> {
    match command.output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!(
            "{:?} exited {}: {}",
            command,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!("{command:?} did not start: {error}")),
    }
}

/// `shiitake-test-services`' rule for a missing service, for the filesystem: one loud
/// `SKIPPED` line on stderr (written directly, so libtest does not capture it) and
/// `None`, or a panic when `SHIITAKE_REQUIRE_SERVICES` is set.
#[track_caller]
fn missing<T>(why: &str) -> Option<T> {
    let required = shiitake_test_services::required(&|name| std::env::var(name).ok());
    let variable = shiitake_test_services::REQUIRE_VAR;
    if required {
        panic!("{SERVICE} is required ({variable}=1) but {why}: {REMEDY}");
    }
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!(
        "SKIPPED {test}: {SERVICE} is missing ({why}), so this test passes without testing \
         anything; to run it: {REMEDY}; with {variable}=1 it fails instead\n"
    );
    if let Err(error) = std::io::stderr().write_all(line.as_bytes()) {
        panic!("cannot write the skip line ({error}): {line}");
    }
    None
}
