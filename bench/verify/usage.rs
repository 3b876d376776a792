//! Owns what a child process used: its exit code, CPU and peak RSS from `wait4`, moto's CPU,
//! and the measured child that reports its own. Must not know which command it measures.

use super::*;

/// A finished child's exit code, CPU (user + sys) and peak RSS (KiB), from `wait4`.
pub(crate) struct Usage {
    pub(crate) code: Option<i32>,
    pub(crate) cpu: Duration,
    pub(crate) max_rss_kib: u64,
}

/// What a command run through `measure_child` gave: its usage, its wall time from its start to
/// its exit, its stdout and its stderr (without the measuring line).
pub(crate) struct Measured {
    pub(crate) usage: Usage,
    pub(crate) wall: f64,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// `program` to run through a fresh copy of this binary (`measure_child`): add its arguments and
/// environment, then `run_measured`.
pub(crate) fn measured(program: &Path) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("this benchmark's path"));
    command.arg(MEASURE_CHILD).arg(program);
    command
}

/// Runs a command made by `measured`, its output read as it comes, and what it used.
pub(crate) fn run_measured(mut command: Command) -> Measured {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("stderr")));
    let status = child.wait().expect("the measuring process");
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let measured = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(MEASURED))
        .map(|rest| rest.split_whitespace().collect::<Vec<_>>());
    let (usage, wall) = match measured.as_deref() {
        Some([code, cpu, rss, wall]) => (
            Usage {
                code: code.parse().ok(),
                cpu: Duration::from_secs_f64(cpu.parse().unwrap_or(0.0)),
                max_rss_kib: rss.parse().unwrap_or(0),
            },
            wall.parse().unwrap_or(0.0),
        ),
        _ => panic!("{command:?} was not measured ({status}):\n{stderr}"),
    };
    let stderr = stderr
        .lines()
        .filter(|l| !l.starts_with(MEASURED))
        .collect::<Vec<_>>()
        .join("\n");
    Measured {
        usage,
        wall,
        stdout,
        stderr,
    }
}

/// Reaps `child` (std's `Child::wait` would find it gone).
pub(crate) fn wait4(child: Child) -> Usage {
    let pid = i32::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it and status for our own unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; pid is our child, reaped only here.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4: {error}"
        );
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        cpu: Duration::from_secs_f64(seconds(usage.ru_utime) + seconds(usage.ru_stime)),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    }
}

/// The moto server: this process's child running `moto_server` (`None` when not found): its CPU
/// time (user + sys) and peak RSS in KiB (VmHWM), from /proc.
pub(crate) fn moto_usage() -> Option<(Duration, u64)> {
    let me = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        // After the command's ')': state 0, ppid 1, utime 11, stime 12 (USER_HZ ticks).
        if fields.get(1) != Some(&me.as_str()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains("moto_server") {
            continue;
        }
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
        let hwm = std::fs::read_to_string(entry.path().join("status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        return Some((
            Duration::from_secs_f64((ticks(11)? + ticks(12)?) / 100.0),
            hwm,
        ));
    }
    None
}

pub(crate) fn moto_cpu() -> Option<Duration> {
    moto_usage().map(|(cpu, _)| cpu)
}

/// The argument that makes this binary run a command and measure it (`measure_child`).
pub(crate) const MEASURE_CHILD: &str = "--measure-child";
/// The line `measure_child` ends its stderr with: exit code, CPU s, peak RSS KiB, wall s.
pub(crate) const MEASURED: &str = "measured-child: ";

/// Runs `command` (this binary re-executed with `--measure-child`), waits for it with `wait4` and
/// ends stderr with its exit code, CPU, peak RSS and wall time.
///
/// Why not from the benchmark itself: Rust's `Command` (as Python's subprocess) starts a child
/// with vfork/`posix_spawn`, so until its `exec` the child runs in the parent's address space, and
/// Linux keeps that address space's high-water mark as the child's `ru_maxrss`: a child of a
/// process that ever held 500 MB reports at least 500 MB (checked here with `/bin/true`). This
/// benchmark holds tens of MB by then (more with N), a fresh copy of it a few MB, less than
/// auditctl's own peak, so that the peak read here is auditctl's.
pub(crate) fn measure_child(command: &[String]) -> ! {
    let started = Instant::now();
    let child = Command::new(&command[0])
        .args(&command[1..])
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", command[0]));
    let usage = wait4(child);
    eprintln!(
        "{MEASURED}{} {:.6} {} {:.6}",
        usage.code.unwrap_or(-1),
        usage.cpu.as_secs_f64(),
        usage.max_rss_kib,
        started.elapsed().as_secs_f64()
    );
    std::process::exit(0)
}
