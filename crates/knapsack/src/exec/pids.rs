//! A process count that holds for root too: each sandboxed command in a cgroup of the
//! `pids` controller of its own, whose `pids.max` the kernel enforces on every fork.
//!
//! `RLIMIT_NPROC` (what `prlimit --nproc` sets) is not applied to root, and a host in a
//! container often runs as root; a fork bomb there would take every process id of the
//! machine. Where this process may create cgroups under its own (cgroup v1's `pids`
//! hierarchy, or cgroup v2 with `pids` delegated), each sandbox makes
//! `<its cgroup>/shiitake-<pid>-<n>/` (all its commands at once, at most four times one
//! command's limit) and in it `c<n>/` per command; a host that starts removes those of
//! processes no longer alive. The command moves itself in before
//! it runs (a `sh` step before `prlimit`, see [`CommandCgroup::enter_argv`]), so
//! everything it starts is counted. Where no cgroup can be made, [`PidsCgroups::detect`]
//! answers why and the host says so at start.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Where this host makes its commands' cgroups.
#[derive(Debug)]
pub struct PidsCgroups {
    /// `<this process's pids cgroup>/shiitake-<pid>-<n>`.
    dir: PathBuf,
    /// Command cgroups that still held a process when their command was done with.
    leftovers: Arc<Mutex<Vec<PathBuf>>>,
}

impl PidsCgroups {
    /// Makes a cgroup for a sandbox's commands under the process's own in the `pids`
    /// hierarchy, limited to `host_limit` processes; why not, when it cannot.
    pub fn detect(host_limit: u64) -> Result<Self, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|error| format!("/proc/self/mountinfo: {error}"))?;
        let membership = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|error| format!("/proc/self/cgroup: {error}"))?;
        let (own, unified) = own_pids_cgroup(&mountinfo, &membership)
            .ok_or_else(|| "no cgroup hierarchy with the pids controller".to_owned())?;
        sweep_dead(&own);
        let dir = own.join(format!(
            "shiitake-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        if unified {
            // The parent must hand `pids` down to its children (refused while it holds
            // processes of its own, unless it is the root).
            write(&own.join("cgroup.subtree_control"), "+pids")?;
        }
        std::fs::create_dir(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        write(&dir.join("pids.max"), &host_limit.to_string())?;
        if unified {
            write(&dir.join("cgroup.subtree_control"), "+pids")?;
        }
        Ok(Self {
            dir,
            leftovers: Arc::default(),
        })
    }

    /// A cgroup for one command, limited to `limit` processes.
    pub(crate) fn make(&self, limit: u64) -> Result<CommandCgroup, String> {
        self.leftovers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
        let dir = self
            .dir
            .join(format!("c{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        write(&dir.join("pids.max"), &limit.to_string())?;
        Ok(CommandCgroup {
            dir,
            leftovers: self.leftovers.clone(),
        })
    }
}

/// Numbers the cgroups this process makes.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Removes, under `own`, the sandboxes' cgroups of processes no longer alive (an
/// earlier life of a host) with their commands' cgroups; `rmdir` refuses one that still
/// holds a process.
fn sweep_dead(own: &Path) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let maker = name
            .to_str()
            .and_then(|name| name.strip_prefix("shiitake-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        let Some(pid) = maker else { continue };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(commands) = std::fs::read_dir(entry.path()) {
            for command in commands.flatten().filter(|c| c.path().is_dir()) {
                let _busy = std::fs::remove_dir(command.path());
            }
        }
        let _busy = std::fs::remove_dir(entry.path());
    }
}

/// The cgroup of one running command; removed once the command is done with (or, when
/// a process of it had not yet exited then, by a later [`PidsCgroups::make`]).
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    dir: PathBuf,
    leftovers: Arc<Mutex<Vec<PathBuf>>>,
}

impl CommandCgroup {
    /// The argv that moves itself into this cgroup and then `exec`s `argv`: one `sh`
    /// that writes its pid to `cgroup.procs` (refusing to run the command when it
    /// cannot) and becomes the command, so the command's pid stays the host's child.
    pub(crate) fn enter_argv(&self, argv: Vec<OsString>) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![
            "/bin/sh".into(),
            "-c".into(),
            r#"echo $$ > "$0" && exec "$@""#.into(),
            self.dir.join("cgroup.procs").into(),
        ];
        out.extend(argv);
        out
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        // Empty once the command's process namespace is gone; otherwise a later make.
        if std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() {
            self.leftovers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(self.dir.clone());
        }
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|error| format!("{}: {error}", path.display()))
}

/// This process's cgroup directory in a `pids` hierarchy, and whether it is cgroup v2:
/// from the mounts (`/proc/self/mountinfo`) and the membership (`/proc/self/cgroup`).
fn own_pids_cgroup(mountinfo: &str, membership: &str) -> Option<(PathBuf, bool)> {
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = before.split(' ').collect();
        let mut rest = after.split(' ');
        let (Some(fstype), Some(_source), Some(options)) = (rest.next(), rest.next(), rest.next())
        else {
            continue;
        };
        let (Some(mount_root), Some(mount_point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        let path = match fstype {
            "cgroup" if options.split(',').any(|option| option == "pids") => {
                membership.lines().find_map(|entry| {
                    let mut parts = entry.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers
                        .split(',')
                        .any(|controller| controller == "pids")
                        .then(|| path.to_owned())
                })
            }
            "cgroup2" => membership
                .lines()
                .find_map(|entry| entry.strip_prefix("0::").map(str::to_owned))
                .filter(|_| v2_has_pids(Path::new(mount_point))),
            _ => None,
        };
        let Some(path) = path else { continue };
        let relative = path
            .strip_prefix(mount_root)
            .unwrap_or(&path)
            .trim_start_matches('/');
        return Some((Path::new(mount_point).join(relative), fstype == "cgroup2"));
    }
    None
}

/// Whether a cgroup v2 mount offers the `pids` controller at its root.
fn v2_has_pids(mount_point: &Path) -> bool {
    std::fs::read_to_string(mount_point.join("cgroup.controllers"))
        .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "pids"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_cgroup_is_found_in_a_v1_pids_hierarchy_and_not_elsewhere() {
        let mountinfo = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
";
        let membership = "8:pids:/box/one\n4:memory:/m\n0::/\n";
        assert_eq!(
            own_pids_cgroup(mountinfo, membership),
            Some((PathBuf::from("/sys/fs/cgroup/pids/box/one"), false))
        );
        // A mount of a subtree: the path is taken relative to the mount's root.
        let nested = "39 31 0:36 /box /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        assert_eq!(
            own_pids_cgroup(nested, membership),
            Some((PathBuf::from("/sys/fs/cgroup/pids/one"), false))
        );
        let without = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(own_pids_cgroup(without, membership), None);
        assert_eq!(own_pids_cgroup("", membership), None);
        assert_eq!(own_pids_cgroup("garbage line", membership), None);
    }
}
