//! Which of `serve`'s Computers run commands, and how confined: `--sandbox on` (the
//! default) runs each command in knapsack's sandbox (bubblewrap and prlimit: the host's
//! files read-only, the Computer's root writable but its `.git`, the data directory, the
//! token file and the other Computers hidden, no network unless `--computer-network`
//! names the Computer). When the sandbox cannot be had here, the Computers offer no
//! commands and `serve` says so at start; `--sandbox off` runs them unconfined, said at
//! start too. `--no-commands` offers none.

use std::path::{Path, PathBuf};

use knapsack::exec::{CommandLimits, LocalCommands, Sandbox, SandboxPolicy};
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

/// What was decided, for the start lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Equipped {
    /// No commands, as asked.
    Off,
    /// No commands: the sandbox cannot be had here.
    NoSandbox(String),
    /// Commands run in the sandbox.
    Sandboxed,
    /// Commands run unconfined, as asked.
    Unconfined,
}

impl Equipped {
    /// The start line that says it.
    pub fn line(&self) -> String {
        match self {
            Self::Off => "shiitake: commands off (--no-commands)".to_owned(),
            Self::NoSandbox(why) => format!(
                "shiitake: commands off: the sandbox cannot be had here ({why}); install \
                 bubblewrap, or run them unconfined with --sandbox off"
            ),
            Self::Sandboxed => {
                "shiitake: commands run in the sandbox (docs/security.md)".to_owned()
            }
            Self::Unconfined => {
                "shiitake: commands run UNCONFINED (--sandbox off): as this user, with its \
                 files and network"
                    .to_owned()
            }
        }
    }
}

/// Checks the flags against the Computers' names, before anything is created.
pub fn check(args: &CommandArgs, dirs: &[(String, PathBuf)]) -> Result<(), CliError> {
    for name in &args.network {
        if !dirs.iter().any(|(known, _)| known == name) {
            let known: Vec<&str> = dirs.iter().map(|(name, _)| name.as_str()).collect();
            return Err(CliError::Setup(format!(
                "--computer-network {name}: no Computer has that name (there are: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// Gives each attachment its commands, as `args` says; `hidden` are the host's own
/// paths no command may see (the data directory, the token file).
pub fn equip(
    attachments: Vec<Attachment>,
    dirs: &[(String, PathBuf)],
    hidden: &[&Path],
    args: &CommandArgs,
) -> Result<(Vec<Attachment>, Equipped), CliError> {
    if args.no_commands {
        return Ok((attachments, Equipped::Off));
    }
    let mut equipped = Vec::with_capacity(attachments.len());
    let mut how = match args.sandbox {
        SandboxMode::On => Equipped::Sandboxed,
        SandboxMode::Off => Equipped::Unconfined,
    };
    for (attachment, (name, dir)) in attachments.into_iter().zip(dirs) {
        let commands = LocalCommands::new(dir, CommandLimits::default())
            .map_err(|error| CliError::Setup(format!("--computer {name}: {error}")))?;
        let commands = match args.sandbox {
            SandboxMode::Off => commands,
            SandboxMode::On => {
                let policy = SandboxPolicy {
                    network: args.network.contains(name),
                    hidden: hidden_from(name, dirs, hidden),
                    ..SandboxPolicy::default()
                };
                match Sandbox::detect(policy) {
                    Ok(sandbox) => commands.with_sandbox(sandbox),
                    Err(error) => {
                        how = Equipped::NoSandbox(error.to_string());
                        equipped.push(attachment);
                        continue;
                    }
                }
            }
        };
        equipped.push(attachment.with_commands(commands));
    }
    if let Equipped::NoSandbox(_) = how {
        // All or nothing: no Computer runs commands when one cannot be confined.
        equipped = equipped
            .into_iter()
            .map(|mut attachment| {
                attachment.commands = None;
                attachment
            })
            .collect();
    }
    Ok((equipped, how))
}

/// What the Computer `name`'s commands must not see: the host's paths and every other
/// Computer's root.
fn hidden_from(name: &str, dirs: &[(String, PathBuf)], hidden: &[&Path]) -> Vec<PathBuf> {
    let real = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    hidden
        .iter()
        .map(|path| real(path))
        .chain(
            dirs.iter()
                .filter(|(other, _)| other != name)
                .map(|(_, dir)| real(dir)),
        )
        .collect()
}
