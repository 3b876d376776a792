//! moto's server on a free 127.0.0.1 port in a process group of its own, stopped with SIGKILL to
//! that group on drop (from code, never through an external `kill`); knows no AWS service.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::net::{free_port, wait_for_port};

/// The repository's root: the workspace's, the ancestor of this package (crates/testkit) that
/// holds `template.yaml`.
pub fn project_root() -> PathBuf {
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .find(|dir| dir.join("template.yaml").exists())
        .map(PathBuf::from)
        .unwrap_or(package)
}

/// moto's server, stopped with its whole process group on drop (also when the test panics).
pub struct MotoServer {
    pub endpoint: String,
    pub port: u16,
    child: Child,
}

impl MotoServer {
    /// Starts moto's server through the project's launcher (`python -m local.motoserver`, with
    /// the Python beside `$MOTO_SERVER`, set by the Makefile, or the repository's `.venv`), and
    /// waits until it listens. The launcher is what the local stack runs: SQS attests each
    /// message's real sender (`SenderId`) and conditional writes are atomic, as in AWS.
    ///
    /// `$MOTO_LAUNCHER`, when set, names another executable taking moto_server's `-H` and `-p`
    /// (the verify benchmark's bench/moto_server.py, which lists versions without moto's copies).
    pub fn start() -> Self {
        let (program, mut args): (PathBuf, Vec<String>) = if let Some(launcher) =
            std::env::var_os("MOTO_LAUNCHER")
        {
            (PathBuf::from(launcher), Vec::new())
        } else {
            let binary = std::env::var_os("MOTO_SERVER")
                .map(PathBuf::from)
                .unwrap_or_else(|| project_root().join(".venv/bin/moto_server"));
            let python = binary.with_file_name("python");
            assert!(
                python.exists(),
                "no Python beside moto_server at {}: run the tests with `make test` (it installs .venv)",
                binary.display()
            );
            (python, vec!["-m".into(), "local.motoserver".into()])
        };
        let binary = program.clone();
        let port = free_port();
        args.extend([
            "-H".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ]);
        let child = Command::new(&program)
            .args(&args)
            .current_dir(project_root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut server = Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
            child,
        };
        wait_for_port(
            port,
            Duration::from_secs(60),
            &mut server.child,
            "moto_server",
        );
        server
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // Our child is not reaped yet, so its pid (its group's id) cannot have been reused.
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}
