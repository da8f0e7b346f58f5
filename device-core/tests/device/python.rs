//! Drives the library through its generated Python bindings (tests/python).

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_python_bindings_drive_every_surface() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/run.sh");
    // The test binary lives in <target>/debug/deps; run.sh builds into the
    // same target dir so nothing is compiled twice.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let output = Command::new("bash").arg(&script).env("CARGO_TARGET_DIR", &target).output().expect("run.sh starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "python tests failed:\n{}\n{stderr}", String::from_utf8_lossy(&output.stdout));
    // unittest reports on stderr; make sure tests actually ran.
    let ran = stderr.lines().find_map(|l| l.strip_prefix("Ran ").and_then(|r| r.split(' ').next()?.parse::<u32>().ok()));
    assert!(ran.unwrap_or(0) >= 14, "expected the Python suite to run, got:\n{stderr}");
    assert!(stderr.trim_end().ends_with("OK"), "{stderr}");
}
