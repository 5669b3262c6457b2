//! A spinner on stderr while long work runs, drawn only when stderr is a terminal (never in pipes, logs or CI).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running spinner; the line is erased when it is dropped.
pub struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Runs `work` with a spinner labelled `label` (elapsed seconds beside it) when stderr is a terminal.
pub fn with<T>(label: &str, work: impl FnOnce() -> T) -> T {
    let _spinner = Spinner::start(label);
    work()
}

impl Spinner {
    /// Starts a spinner (nothing happens when stderr is not a terminal).
    pub fn start(label: &str) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Spinner { stop, thread: None };
        }
        let (flag, label) = (stop.clone(), label.to_string());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let frames = ['|', '/', '-', '\\'];
            let mut i = 0;
            while !flag.load(Ordering::Relaxed) {
                // Drawn after 200 ms only: short work leaves the terminal untouched.
                if t0.elapsed() > Duration::from_millis(200) {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r{} {label} {:.1} s ", frames[i % frames.len()], t0.elapsed().as_secs_f64());
                    let _ = err.flush();
                    i += 1;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if i > 0 {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            }
        });
        Spinner { stop, thread: Some(thread) }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
