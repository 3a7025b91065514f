//! Which of `serve`'s Computers run commands, and how confined: `--sandbox on` (the
//! default) runs each command in knapsack's sandbox (bubblewrap and prlimit: the host's
//! files read-only, the Computer's root writable but its `.git`, the data directory, the
//! token file and the other Computers hidden, no network unless `--computer-network`
//! names the Computer). When the sandbox cannot be had here, the Computers offer no
//! commands and `serve` says so at start; `--sandbox off` runs them unconfined, said at
//! start too. `--no-commands` offers none. On a Hub each tenant's Computer runs its
//! commands in its own folder, the folders of the other tenants hidden.

use std::path::{Path, PathBuf};

use knapsack::exec::{CommandLimits, LocalCommands, ProcessCount, Sandbox, SandboxPolicy};
use shiitake_ext_home::Attachment;

use crate::error::CliError;

/// Whether commands run in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxMode {
    /// In the sandbox; no commands when it cannot be had.
    On,
    /// Unconfined: as the user `serve` runs as, with the host's network.
    Off,
}

/// The options of `serve` about commands.
#[derive(Debug, clap::Args)]
pub struct CommandArgs {
    /// How the Computers' commands run: `on` (the default) in the sandbox (the host's
    /// files read-only, the Computer's root writable but `.git`, the data directory and
    /// the other Computers hidden, no network), `off` unconfined. See docs/security.md.
    #[arg(long, value_enum, value_name = "on|off", default_value = "on")]
    sandbox: SandboxMode,
    /// A Computer whose commands may reach the network (repeatable); the others have none.
    #[arg(long = "computer-network", value_name = "NAME")]
    network: Vec<String>,
    /// The Computers offer file tools only: no `commands.exec`.
    #[arg(long)]
    no_commands: bool,
}

/// How this process's Computers run commands.
#[derive(Debug, Clone)]
enum How {
    /// No commands, as asked.
    Off,
    /// No commands: the sandbox cannot be had here (why).
    NoSandbox(String),
    /// In this sandbox (its policy is each Computer's own).
    Sandboxed(Sandbox),
    /// Unconfined, as asked.
    Unconfined,
}

/// What `serve` decided about commands at start, applied to each Computer it attaches
/// (on a Hub, each tenant's as the tenant opens).
#[derive(Debug, Clone)]
pub struct CommandSetup {
    how: How,
    network: Vec<String>,
    /// The host's own paths no command may see: the data directory, the token file.
    hidden: Vec<PathBuf>,
    /// This host's name in its sandboxes' arguments (from its data directory), by which
    /// its next life finds the commands it left running.
    host: String,
    /// Commands an earlier life of this host left running, ended at start.
    swept: usize,
}

impl CommandSetup {
    /// Checks the flags against the Computers' names (before anything is created) and
    /// finds the sandbox once; `hidden` are the host's own paths.
    pub fn new(
        args: &CommandArgs,
        dirs: &[(String, PathBuf)],
        data_dir: &Path,
        hidden: Vec<PathBuf>,
    ) -> Result<Self, CliError> {
        for name in &args.network {
            if !dirs.iter().any(|(known, _)| known == name) {
                let known: Vec<&str> = dirs.iter().map(|(name, _)| name.as_str()).collect();
                return Err(CliError::Setup(format!(
                    "--computer-network {name}: no Computer has that name (there are: {})",
                    known.join(", ")
                )));
            }
        }
        let how = match (args.no_commands, args.sandbox) {
            (true, _) => How::Off,
            (false, SandboxMode::Off) => How::Unconfined,
            (false, SandboxMode::On) => match Sandbox::detect(SandboxPolicy::default()) {
                Ok(sandbox) => How::Sandboxed(sandbox),
                Err(error) => How::NoSandbox(error.to_string()),
            },
        };
        let host = host_name(&real(data_dir));
        // Before any command of this life runs: what an earlier one left is an orphan.
        let swept = match how {
            How::Sandboxed(_) => knapsack::exec::sweep_orphans(&host),
            _ => 0,
        };
        Ok(Self {
            how,
            network: args.network.clone(),
            hidden: hidden.iter().map(|path| real(path)).collect(),
            host,
            swept,
        })
    }

    /// No commands anywhere (what `--no-commands` gives).
    #[cfg(test)]
    pub fn off() -> Self {
        Self {
            how: How::Off,
            network: Vec::new(),
            hidden: Vec::new(),
            host: String::new(),
            swept: 0,
        }
    }

    /// The start lines that say how commands run, and what an earlier life left.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![self.line()];
        if self.swept > 0 {
            lines.push(format!(
                "shiitake: ended {} command sandboxes a stopped serve on this data directory \
                 left running",
                self.swept
            ));
        }
        lines
    }

    /// The start line that says how commands run.
    fn line(&self) -> String {
        match &self.how {
            How::Off => "shiitake: commands off (--no-commands)".to_owned(),
            How::NoSandbox(why) => format!(
                "shiitake: commands off: the sandbox cannot be had here ({why}); install \
                 bubblewrap, or run them unconfined with --sandbox off"
            ),
            How::Sandboxed(sandbox) => {
                let processes = sandbox.policy().limits.processes;
                match sandbox.process_count() {
                    ProcessCount::Cgroup => format!(
                        "shiitake: commands run in the sandbox, at most {processes} processes \
                         each (a pids cgroup; docs/security.md)"
                    ),
                    ProcessCount::UserLimit(why) => format!(
                        "shiitake: commands run in the sandbox, at most {processes} processes \
                         of this user (RLIMIT_NPROC; no pids cgroup: {why}; docs/security.md)"
                    ),
                    ProcessCount::Unbounded(why) => format!(
                        "shiitake: commands run in the sandbox (docs/security.md); WARNING: \
                         their processes are not counted (root, which RLIMIT_NPROC exempts, \
                         and no pids cgroup: {why}): a fork bomb meets only the time limit"
                    ),
                }
            }
            How::Unconfined => "shiitake: commands run UNCONFINED (--sandbox off): as this \
                                user, with its files and network"
                .to_owned(),
        }
    }

    /// `attachment` (the Computer `name`, whose files are in `root`) with its commands,
    /// when commands run here; `also_hidden` are paths its commands must not see besides
    /// the host's (the other Computers, the other tenants' folders).
    pub fn equip(
        &self,
        attachment: Attachment,
        name: &str,
        root: &Path,
        also_hidden: &[PathBuf],
    ) -> Result<Attachment, String> {
        let commands = || {
            LocalCommands::new(root, CommandLimits::default()).map_err(|error| error.to_string())
        };
        Ok(match &self.how {
            How::Off | How::NoSandbox(_) => attachment,
            How::Unconfined => attachment.with_commands(commands()?),
            How::Sandboxed(sandbox) => {
                let policy = SandboxPolicy {
                    network: self.network.iter().any(|open| open == name),
                    hidden: self
                        .hidden
                        .iter()
                        .cloned()
                        .chain(also_hidden.iter().map(|path| real(path)))
                        .collect(),
                    host: Some(self.host.clone()),
                    ..SandboxPolicy::default()
                };
                attachment.with_commands(commands()?.with_sandbox(sandbox.with_policy(policy)))
            }
        })
    }
}

/// Gives each of Local's attachments its commands: the Computer `name` at `dir` hides
/// every other Computer's root.
pub fn equip_all(
    setup: &CommandSetup,
    attachments: Vec<Attachment>,
    dirs: &[(String, PathBuf)],
) -> Result<Vec<Attachment>, CliError> {
    attachments
        .into_iter()
        .zip(dirs)
        .map(|(attachment, (name, dir))| {
            let others: Vec<PathBuf> = dirs
                .iter()
                .filter(|(other, _)| other != name)
                .map(|(_, dir)| dir.clone())
                .collect();
            setup
                .equip(attachment, name, dir, &others)
                .map_err(|error| CliError::Setup(format!("--computer {name}: {error}")))
        })
        .collect()
}

/// The name of the host of `data_dir` in its sandboxes' arguments: `shiitake-` and a
/// hash of the directory (FNV-1a 64, a name, not a secret).
fn host_name(data_dir: &Path) -> String {
    let hash = data_dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("shiitake-{hash:016x}")
}

/// `path` with its symlinks resolved, as the sandbox mounts it; as given when it does
/// not exist.
fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}
