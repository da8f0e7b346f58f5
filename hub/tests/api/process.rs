//! The `hub` binary as a process: migrate, serve, graceful shutdown on
//! SIGTERM, and logs that never carry a secret.

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::json;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn migrate_creates_the_schema_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hub")).args(["migrate", "--data-dir"]).arg(dir.path()).env_remove("DATABASE_URL").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join("hub.db").exists());
}

#[test]
fn sigterm_drains_in_flight_requests_and_exits_zero_without_logging_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hub"))
        .arg("serve")
        .env("HUB_LISTEN", format!("127.0.0.1:{port}"))
        .env("HUB_DATA_DIR", dir.path())
        .env("HUB_DEV", "1")
        .env("HUB_LOG", "debug")
        // Not the default UDP port: other tests run hubs at the same time.
        .env("HUB_QUIC_LISTEN", "127.0.0.1:0")
        .env_remove("DATABASE_URL")
        .env_remove("HUB_MASTER_KEY")
        .env_remove("AUTH_GATE_MODE")
        // Logs go to a file: an unread pipe would fill up and block the hub.
        .stdout(Stdio::from(std::fs::File::create(dir.path().join("hub.log")).unwrap()))
        .stderr(Stdio::from(std::fs::File::options().append(true).create(true).open(dir.path().join("hub.log")).unwrap()))
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    let client = reqwest::blocking_client();
    loop {
        if client.get(format!("{base}/ready")).send().is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "hub did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let password = "a very secret password";
    let signup: serde_json::Value = client
        .post(format!("{base}/api/auth/signup-tenant"))
        .json(&json!({ "email": "p@example.com", "password": password, "org_name": "O", "app_id": "proc", "display_name": "P", "region": "r" }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let token = signup["data"]["token"].as_str().unwrap().to_string();
    let app: serde_json::Value = client
        .post(format!("{base}/api/applications"))
        .bearer_auth(&token)
        .json(&json!({ "name": "a", "slug": "a", "environment": "live" }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let key: serde_json::Value = client
        .post(format!("{base}/api/applications/{}/keys", app["data"]["application_id"].as_str().unwrap()))
        .bearer_auth(&token)
        .json(&json!({ "name": "k", "scopes": ["*"] }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let secret = key["data"]["api_key"].as_str().unwrap().to_string();
    assert_eq!(client.get(format!("{base}/api/me")).bearer_auth(&secret).send().unwrap().status(), 200);
    assert_eq!(client.get(format!("{base}/api/me")).bearer_auth("pk_live_wrongwrongwrong").send().unwrap().status(), 401);

    // A request in flight: headers and all but the last byte of the body.
    let body = json!({ "email": "nobody@example.com", "password": "whatever1" }).to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
        .unwrap();
    stream.write_all(&body.as_bytes()[..body.len() - 1]).unwrap();
    stream.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(300));
    // The server is draining: the in-flight request still gets its answer.
    stream.write_all(&body.as_bytes()[body.len() - 1..]).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");

    let status = child.wait().unwrap();
    let logs = std::fs::read_to_string(dir.path().join("hub.log")).unwrap();
    assert_eq!(status.code(), Some(0), "{logs}");
    assert!(logs.contains("hub listening") && logs.contains("stopped"), "{logs}");
    for secret_text in [password, &secret, &token, "pk_live_wrongwrongwrong"] {
        assert!(!logs.contains(secret_text), "a secret reached the log");
    }
}

mod reqwest {
    //! A blocking client for the process tests, built on the async one.
    pub fn blocking_client() -> Blocking {
        Blocking { rt: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(), inner: ::reqwest::Client::new() }
    }
    pub struct Blocking {
        rt: tokio::runtime::Runtime,
        inner: ::reqwest::Client,
    }
    pub struct Req<'a> {
        c: &'a Blocking,
        b: ::reqwest::RequestBuilder,
    }
    pub struct Res<'a> {
        c: &'a Blocking,
        r: ::reqwest::Response,
    }
    impl Blocking {
        pub fn get(&self, url: String) -> Req<'_> {
            Req { c: self, b: self.inner.get(url) }
        }
        pub fn post(&self, url: String) -> Req<'_> {
            Req { c: self, b: self.inner.post(url) }
        }
    }
    impl<'a> Req<'a> {
        pub fn bearer_auth(self, t: &str) -> Self {
            Req { c: self.c, b: self.b.bearer_auth(t) }
        }
        pub fn json(self, v: &serde_json::Value) -> Self {
            Req { c: self.c, b: self.b.json(v) }
        }
        pub fn send(self) -> Result<Res<'a>, ::reqwest::Error> {
            let r = self.c.rt.block_on(self.b.send())?;
            Ok(Res { c: self.c, r })
        }
    }
    impl Res<'_> {
        pub fn status(&self) -> u16 {
            self.r.status().as_u16()
        }
        pub fn json(self) -> Result<serde_json::Value, ::reqwest::Error> {
            self.c.rt.block_on(self.r.json())
        }
    }
}
