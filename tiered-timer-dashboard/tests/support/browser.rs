//! Headless chromium driven through WebDriver (chromedriver), for the
//! dashboard's browser tests (here and `ttr`'s, which includes this file).
//!
//! Without chromium and chromedriver the tests fail, saying how to install
//! them (`.ci/run` does).

#![allow(dead_code)] // each test file uses its own part

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// A child process killed on drop.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// chromedriver on a free port.
pub fn chromedriver() -> (Running, u16) {
    let port = free_port();
    let child = match Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => panic!(
            "chromedriver could not be started ({e}): this test drives a real browser. \
             Install it with `apt-get install -y chromium chromium-driver`."
        ),
    };
    let running = Running(child);
    wait_for_port(port, "chromedriver");
    (running, port)
}

/// A headless chromium session with its profile in `profile`.
pub async fn browser(driver_port: u16, profile: &std::path::Path) -> Client {
    let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("chromium is not installed: `apt-get install -y chromium chromium-driver`");
    let mut caps = serde_json::Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": binary,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--hide-scrollbars",
                "--window-size=1280,960",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("a WebDriver session in chromium")
}

/// The element `css` once it is there (a click's navigation may still
/// be under way), within 10 s.
pub async fn wait_for(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
}

/// The text of the element `css`, once it is there.
pub async fn text(client: &Client, css: &str) -> String {
    wait_for(client, css).await.text().await.unwrap()
}
