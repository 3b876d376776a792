//! A child process started in a process group of its own, stopped on drop with SIGKILL sent to
//! that group and to the groups its descendants lead (`cargo lambda watch` runs the function in
//! a session of its own), all from code: an external `kill` binary is never used (procps-ng
//! 4.0.2 reads `kill -TERM -12` as `kill(-1, SIGTERM)`, every process the user may signal).

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

pub struct Group {
    pub child: Child,
}

impl Group {
    /// Spawns `command` as the leader of a new process group.
    pub fn spawn(command: &mut Command) -> std::io::Result<Self> {
        let child = command.process_group(0).spawn()?;
        Ok(Self { child })
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let leader = self.child.id() as i32;
        // Descendants first, while their parent links still lead to us.
        let tree = descendants(leader);
        // Our child is not reaped yet, so its pid, and so its group id, cannot have been reused.
        let _ = killpg(Pid::from_raw(leader), Signal::SIGKILL);
        for &(pid, pgid) in &tree {
            if pid == pgid {
                // A descendant that leads a group (or session) of its own: stop that group too.
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            }
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Every (pid, process group id) below `root` in the process tree, read from /proc.
pub fn descendants(root: i32) -> Vec<(i32, i32)> {
    let mut table = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
            let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if let (Some(ppid), Some(pgrp)) = (
                fields.get(1).and_then(|f| f.parse::<i32>().ok()),
                fields.get(2).and_then(|f| f.parse::<i32>().ok()),
            ) {
                table.push((pid, ppid, pgrp));
            }
        }
    }
    let mut found = BTreeSet::from([root]);
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for &(pid, ppid, pgrp) in &table {
            if found.contains(&ppid) && found.insert(pid) {
                out.push((pid, pgrp));
            }
        }
        if out.len() == before {
            return out;
        }
    }
}
