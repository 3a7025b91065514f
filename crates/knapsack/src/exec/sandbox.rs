//! The sandbox a Computer's commands run in: bubblewrap (Debian's `bwrap`) for the
//! namespaces and mounts, `prlimit` (util-linux) for the resource limits, both set up
//! before the command starts and inherited by everything it starts.
//!
//! The workspace forbids `unsafe`, so nothing can run in the host between `fork` and
//! `exec`; the confinement is therefore done by programs the command is started
//! through: `prlimit` sets its limits and `exec`s `bwrap`, which builds the namespaces
//! and `exec`s the command. Why these and not Landlock is in docs/security.md.
//!
//! What the command gets ([`Sandbox::wrap`]):
//!
//! - the host's filesystem read-only (`--ro-bind / /`), a fresh `/dev` and a `/proc` of
//!   its own process namespace (the host's processes and their environments are not
//!   there), a private empty `/tmp`;
//! - the Computer's root writable, except `.git` inside it (read-only unless the host
//!   allows writing it);
//! - each hidden path (the data directory, the token, the other Computers' roots)
//!   replaced by an empty read-only directory, or `/dev/null` for a file;
//! - no network at all (a network namespace of its own, not even loopback) unless the
//!   host opens it;
//! - a process namespace whose first process dies with the host's thread that started
//!   it (`--die-with-parent`), taking every process of the command with it, including
//!   one that left the process group (`setsid`);
//! - a session of its own (no terminal to inject input into);
//! - no capabilities, even for root (`--cap-drop ALL`), and no new privileges (bubblewrap
//!   sets `PR_SET_NO_NEW_PRIVS`: a setuid program gains nothing);
//! - CPU time, address space, file size and process count limited; the process count
//!   also by a `pids` cgroup of its own where the host can make one (`pids.rs`), which
//!   holds for root too.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::pids::{CommandCgroup, PidsCgroups};

/// The resource limits of a sandboxed command and everything it starts (`setrlimit`,
/// each inherited: a limit per process, not for the command as a whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessLimits {
    /// CPU seconds per process (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Bytes of address space per process (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// The largest file a process may write (`RLIMIT_FSIZE`).
    pub file_bytes: u64,
    /// Processes at once: of the user (`RLIMIT_NPROC`, which the kernel does not apply
    /// to root), and of the command (its `pids` cgroup's `pids.max`, where the host can
    /// make one; [`Sandbox::process_count`] says which holds).
    pub processes: u64,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self {
            cpu_seconds: 1800,
            memory_bytes: 8 << 30,
            file_bytes: 1 << 30,
            processes: 1024,
        }
    }
}

/// What a Computer's commands may reach.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxPolicy {
    /// Whether commands reach the network (off: a network namespace with nothing in it).
    pub network: bool,
    /// Whether commands may write the root's `.git` (off: it is mounted read-only).
    pub writable_git: bool,
    /// Paths a command must not read or write: the host's data directory, its token,
    /// the other Computers' roots. Those that do not exist are skipped.
    pub hidden: Vec<PathBuf>,
    /// The resource limits of each process.
    pub limits: ProcessLimits,
    /// The host's name for its sandboxes, written into bubblewrap's arguments
    /// (`--setenv SHIITAKE_SANDBOX_HOST <host>`), by which a host that starts again
    /// finds the commands an earlier life of it left running ([`sweep_orphans`]).
    pub host: Option<String>,
}

/// The variable bubblewrap's arguments carry the host's name in.
const HOST_VAR: &str = "SHIITAKE_SANDBOX_HOST";

/// Ends the sandboxes of `host` that outlived the host that started them, and answers
/// how many. A host sets bubblewrap's parent-death signal only once bubblewrap runs, so
/// a host killed within those first milliseconds leaves that command running, its
/// sandbox adopted by process 1; a host calls this as it starts, before it runs any
/// command. A sandbox adopted by another subreaper than process 1 is not found.
#[cfg(target_os = "linux")]
pub fn sweep_orphans(host: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let wanted: [&[u8]; 3] = [b"--setenv", HOST_VAR.as_bytes(), host.as_bytes()];
    // Every bubblewrap of this host, with its parent: the outer one, and the one it
    // forked as the first process of the sandbox.
    let mut ours: Vec<(i32, i32)> = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        let tagged = args
            .first()
            .is_some_and(|program| program.ends_with(b"bwrap"))
            && args.windows(3).any(|window| window == wanted);
        if let (true, Some(parent)) = (tagged, parent_of(&entry.path())) {
            ours.push((pid, parent));
        }
    }
    // The orphans (adopted by process 1) and the sandboxes' first processes under them.
    let orphans: Vec<i32> = ours
        .iter()
        .filter(|(_, parent)| *parent == 1)
        .map(|(pid, _)| *pid)
        .collect();
    let mut ended = 0;
    for (pid, parent) in &ours {
        if !(orphans.contains(pid) || orphans.contains(parent)) {
            continue;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(*pid)
            && rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
            && orphans.contains(&pid.as_raw_nonzero().get())
        {
            ended += 1;
        }
    }
    ended
}

/// The parent pid `/proc/<pid>/status` names.
#[cfg(target_os = "linux")]
fn parent_of(process: &Path) -> Option<i32> {
    let status = std::fs::read_to_string(process.join("status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .and_then(|ppid| ppid.trim().parse().ok())
}

/// Why the sandbox cannot be given here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxUnavailable {
    /// A program the sandbox is built with is not installed.
    #[error("`{program}` is not installed (Debian package `{package}`)")]
    Missing {
        /// The program looked for on `PATH`.
        program: &'static str,
        /// The Debian package that has it.
        package: &'static str,
    },
    /// The kernel refused what the sandbox needs (namespaces), in bubblewrap's words.
    #[error("bubblewrap cannot build a sandbox here: {detail}")]
    Refused {
        /// What bubblewrap said.
        detail: String,
    },
}

/// The sandbox programs found on this machine and the policy they apply.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    prlimit: PathBuf,
    policy: SandboxPolicy,
    /// Each command's `pids` cgroup, or why there is none.
    pids: Result<Arc<PidsCgroups>, String>,
}

/// What bounds the number of processes of one sandboxed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessCount {
    /// A `pids` cgroup per command: the limit holds for every user, root included.
    Cgroup,
    /// `RLIMIT_NPROC` alone (no cgroup could be made: the reason); it holds because the
    /// host does not run as root.
    UserLimit(String),
    /// Nothing: the host runs as root, which `RLIMIT_NPROC` exempts, and no cgroup could
    /// be made (the reason). A fork bomb meets only the time limit.
    Unbounded(String),
}

/// How many `processes` all of a host's commands may have at once, as a multiple of
/// one command's limit.
const HOST_PROCESS_FACTOR: u64 = 4;

impl Sandbox {
    /// Finds `bwrap` and `prlimit` on `PATH` and checks, by running `true` in a sandbox
    /// of this policy, that the kernel gives what it needs.
    pub fn detect(policy: SandboxPolicy) -> Result<Self, SandboxUnavailable> {
        let bwrap = on_path("bwrap").ok_or(SandboxUnavailable::Missing {
            program: "bwrap",
            package: "bubblewrap",
        })?;
        let prlimit = on_path("prlimit").ok_or(SandboxUnavailable::Missing {
            program: "prlimit",
            package: "util-linux",
        })?;
        let pids = PidsCgroups::detect(policy.limits.processes.saturating_mul(HOST_PROCESS_FACTOR))
            .map(Arc::new);
        let sandbox = Self {
            bwrap,
            prlimit,
            policy,
            pids,
        };
        let probe = std::env::temp_dir();
        let (argv, _cgroup) = sandbox
            .wrap(&probe, &probe, &["true".to_owned()])
            .map_err(|detail| SandboxUnavailable::Refused { detail })?;
        let output = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|error| SandboxUnavailable::Refused {
                detail: error.to_string(),
            })?;
        if !output.status.success() {
            return Err(SandboxUnavailable::Refused {
                detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(sandbox)
    }

    /// The same programs with another policy, without probing again: for a host that
    /// builds one sandbox per Computer (another network, other hidden paths).
    #[must_use]
    pub fn with_policy(&self, policy: SandboxPolicy) -> Self {
        Self {
            bwrap: self.bwrap.clone(),
            prlimit: self.prlimit.clone(),
            policy,
            pids: self.pids.clone(),
        }
    }

    /// What bounds the number of processes of one command here.
    pub fn process_count(&self) -> ProcessCount {
        match &self.pids {
            Ok(_) => ProcessCount::Cgroup,
            Err(why) if running_as_root() => ProcessCount::Unbounded(why.clone()),
            Err(why) => ProcessCount::UserLimit(why.clone()),
        }
    }

    /// The policy it applies.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The argv that runs `argv` in this sandbox, with `root` writable and `cwd` (inside
    /// it) the working directory (both real paths, no symlink), and the command's `pids`
    /// cgroup, to keep while it runs; `Err` when its cgroup could not be made.
    pub(crate) fn wrap(
        &self,
        root: &Path,
        cwd: &Path,
        argv: &[String],
    ) -> Result<(Vec<OsString>, Option<CommandCgroup>), String> {
        let confined = self.confine(root, cwd, argv);
        match &self.pids {
            Ok(pids) => {
                let cgroup = pids.make(self.policy.limits.processes)?;
                Ok((cgroup.enter_argv(confined), Some(cgroup)))
            }
            Err(_) => Ok((confined, None)),
        }
    }

    /// `prlimit` and `bwrap`'s argv for `argv` (see [`Sandbox::wrap`]).
    fn confine(&self, root: &Path, cwd: &Path, argv: &[String]) -> Vec<OsString> {
        let limits = &self.policy.limits;
        let mut out: Vec<OsString> = vec![
            self.prlimit.clone().into(),
            format!("--cpu={}", limits.cpu_seconds).into(),
            format!("--as={}", limits.memory_bytes).into(),
            format!("--fsize={}", limits.file_bytes).into(),
            format!("--nproc={}", limits.processes).into(),
            "--".into(),
            self.bwrap.clone().into(),
            "--die-with-parent".into(),
            "--new-session".into(),
            // Root keeps no capability in the sandbox (no module loading, no clock, no
            // raw I/O); bubblewrap also sets no-new-privileges, so none is gained later.
            "--cap-drop".into(),
            "ALL".into(),
            "--unshare-pid".into(),
            "--unshare-ipc".into(),
            "--unshare-uts".into(),
        ];
        if !self.policy.network {
            out.push("--unshare-net".into());
        }
        if let Some(host) = &self.policy.host {
            out.extend(["--setenv".into(), HOST_VAR.into(), host.into()]);
        }
        for flag in ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"] {
            out.push(flag.into());
        }
        out.extend(["--tmpfs".into(), "/tmp".into()]);
        // Hidden paths outside the root first, so the root's mount (which may lie
        // beneath one of them) comes after; those inside the root after it.
        let (inside, outside): (Vec<&PathBuf>, Vec<&PathBuf>) = self
            .policy
            .hidden
            .iter()
            .filter(|path| path.exists())
            .partition(|path| path.starts_with(root));
        // An empty directory is made read-only at the end, once what is mounted beneath
        // it (the root, when the hidden path is its ancestor) has its mount point.
        let mut read_only = Vec::new();
        for path in outside {
            hide(&mut out, &mut read_only, path);
        }
        out.extend(["--bind".into(), root.into(), root.into()]);
        let git = root.join(".git");
        if !self.policy.writable_git && git.exists() {
            out.extend(["--ro-bind".into(), git.clone().into(), git.into()]);
        }
        for path in inside {
            hide(&mut out, &mut read_only, path);
        }
        for path in read_only {
            out.extend(["--remount-ro".into(), path]);
        }
        out.extend(["--chdir".into(), cwd.into(), "--".into()]);
        out.extend(argv.iter().map(OsString::from));
        out
    }
}

/// Hides `path` from the command: an empty directory over a directory (to be made
/// read-only, in `read_only`), `/dev/null` over a file.
fn hide(out: &mut Vec<OsString>, read_only: &mut Vec<OsString>, path: &Path) {
    if path.is_dir() {
        out.extend(["--tmpfs".into(), path.into()]);
        read_only.push(path.into());
    } else {
        out.extend(["--ro-bind".into(), "/dev/null".into(), path.into()]);
    }
}

/// Whether this process runs as root (whom `RLIMIT_NPROC` does not bind).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|uids| uids.split_whitespace().next())
            == Some("0")
    })
}

/// The first executable file called `name` in the host's `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}
