//! A real Chromium for dashboard tests, driven over WebDriver (Debian's `chromium` and
//! `chromium-driver`, installed by `scripts/test.sh`). A missing browser fails the test with
//! an install hint — never a skip.

use fantoccini::{Client, ClientBuilder, Locator};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What to do when the browser is missing.
pub const INSTALL_HINT: &str = "chromium or chromedriver is not installed: run `apt-get install \
     -y chromium chromium-driver` (./scripts/test.sh does), or point FLOTILLA_CHROMIUM and \
     FLOTILLA_CHROMEDRIVER at them";

/// How long a page may take to show what a test waits for.
pub const PAGE: Duration = Duration::from_secs(20);

fn find(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = path
        .split(':')
        .map(PathBuf::from)
        .chain(["/usr/bin", "/usr/lib/chromium"].map(PathBuf::from))
        .collect();
    candidates
        .iter()
        .flat_map(|c| dirs.iter().map(move |d| d.join(c)))
        .find(|p| p.is_file())
}

/// A headless Chromium session.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session through it.
    pub async fn start() -> Self {
        // Debian's /usr/bin/chromium is a wrapper script; the browser itself is beside the
        // driver.
        let chromium = find("FLOTILLA_CHROMIUM", &["chromium", "chromium-browser"])
            .map(|p| {
                let real = PathBuf::from("/usr/lib/chromium/chromium");
                if p == std::path::Path::new("/usr/bin/chromium") && real.is_file() {
                    real
                } else {
                    p
                }
            })
            .unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let chromedriver = find("FLOTILLA_CHROMEDRIVER", &["chromedriver"])
            .unwrap_or_else(|| panic!("{INSTALL_HINT}"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}; {INSTALL_HINT}", chromedriver.display()));
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions", "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "chromedriver not ready yet");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no browser session from chromedriver: {e}; {INSTALL_HINT}"),
            }
        };
        Self {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        tokio::time::timeout(PAGE, self.client.goto(url))
            .await
            .unwrap_or_else(|_| panic!("{url} did not load in time"))
            .unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    /// Runs `script` (a function body returning a value) in the page.
    pub async fn js(&self, script: &str) -> serde_json::Value {
        tokio::time::timeout(PAGE, self.client.execute(script, vec![]))
            .await
            .expect("script ran in time")
            .unwrap_or_else(|e| panic!("script {script:?}: {e}"))
    }

    /// Waits until `script` returns `true`, polling every 50 ms; panics after `within` with
    /// the page's text.
    pub async fn wait_until(&self, script: &str, what: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.js(script).await == serde_json::Value::Bool(true) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let text = self
                    .js("return document.body ? document.body.innerText : ''")
                    .await;
                let url = self.client.current_url().await.map(|u| u.to_string());
                panic!("timed out waiting for {what} at {url:?}; the page shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of the element `css`.
    pub async fn text(&self, css: &str) -> String {
        let el = tokio::time::timeout(
            PAGE,
            self.client
                .wait()
                .at_most(PAGE)
                .for_element(Locator::Css(css)),
        )
        .await
        .expect("element in time")
        .unwrap_or_else(|e| panic!("no element {css}: {e}"));
        el.text().await.unwrap()
    }

    /// Types into the element `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let el = self
            .client
            .wait()
            .at_most(PAGE)
            .for_element(Locator::Css(css))
            .await
            .unwrap();
        el.send_keys(text).await.unwrap();
    }

    /// Clicks the element `css`.
    pub async fn click(&self, css: &str) {
        let el = self
            .client
            .wait()
            .at_most(PAGE)
            .for_element(Locator::Css(css))
            .await
            .unwrap();
        el.click().await.unwrap();
    }

    /// Saves a screenshot as `<dir>/<name>.png` when `FLOTILLA_SCREENSHOTS` names a directory
    /// (how docs/dashboard/ is made: `FLOTILLA_SCREENSHOTS=$PWD/docs/dashboard cargo test -p
    /// flotilla-hub --test dashboard_browser`).
    pub async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("FLOTILLA_SCREENSHOTS") else {
            return;
        };
        let png = tokio::time::timeout(PAGE, self.client.screenshot())
            .await
            .expect("screenshot in time")
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(PathBuf::from(dir).join(format!("{name}.png")), png).unwrap();
    }

    /// Ends the session and the driver.
    pub async fn stop(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.clone().close()).await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
