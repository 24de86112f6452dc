//! A real browser: Debian's chromium, headless, driven through WebDriver
//! (chromedriver, started on a free port) with fantoccini. Every page a
//! test visits is photographed into the test output directory
//! (`console-screenshots/`) and checked by axe-core, which must report no
//! serious or critical accessibility violation.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// Where screenshots go.
pub fn shots_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
}

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    axe: String,
    prefix: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn required(variable: &str, default: &str) -> String {
    let path = std::env::var(variable).unwrap_or_else(|_| default.to_string());
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: scripts/install-browser.sh and scripts/install-axe.sh install chromium, \
         chromium-driver and axe-core (scripts/test.sh runs them and sets {variable})"
    );
    path
}

impl Browser {
    /// A fresh browser (its own empty profile); screenshots named
    /// `<prefix>-<page>.png`.
    pub async fn start(prefix: &str) -> Browser {
        let driver_bin = required("CHROMEDRIVER_BIN", "/usr/bin/chromedriver");
        let axe = std::fs::read_to_string(required("AXE_CORE_JS", "axe.min.js")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let chromium = std::env::var("CHROMIUM_BIN").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,900",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({ "goog:chromeOptions": { "binary": chromium, "args": args } });
        let Value::Object(capabilities) = capabilities else { unreachable!() };
        let url = format!("http://127.0.0.1:{port}");
        let mut last = None;
        for _ in 0..100 {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    std::fs::create_dir_all(shots_dir()).unwrap();
                    return Browser { client, driver, _profile: profile, axe, prefix: prefix.into() };
                }
                Err(error) => last = Some(error),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not start a browser: {last:?}");
    }

    /// Opens `url`, then photographs and checks the page as `name`.
    pub async fn visit(&self, url: &str, name: &str) {
        self.client.goto(url).await.unwrap();
        self.check(name).await;
    }

    /// Photographs the page shown as `name` and checks it with axe-core.
    pub async fn check(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(shots_dir().join(format!("{}-{name}.png", self.prefix)), png).unwrap();
        self.client.execute(&self.axe, vec![]).await.unwrap();
        let script = "const done = arguments[arguments.length - 1];
            axe.run(document, { resultTypes: ['violations'] }).then(result => done(result.violations
              .filter(v => v.impact === 'serious' || v.impact === 'critical')
              .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' at ' + v.nodes.map(n => n.target.join(' ')).join(', '))))
              .catch(error => done(['axe failed: ' + error]));";
        let violations = self.client.execute_async(script, vec![]).await.unwrap();
        let violations: Vec<String> = serde_json::from_value(violations).unwrap();
        assert!(violations.is_empty(), "{name}: accessibility violations: {violations:#?}");
    }

    pub async fn find(&self, css: &str) -> Element {
        self.client.wait().at_most(Duration::from_secs(10)).for_element(Locator::Css(css)).await.unwrap()
    }

    /// Types `text` into the field `css`.
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Clicks `css` and waits for the page it leads to.
    pub async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.navigating(async { element.click().await.unwrap() }).await;
    }

    /// Runs `action`, which leaves the page, and waits until the next page
    /// has loaded.
    pub async fn navigating(&self, action: impl std::future::Future<Output = ()>) {
        self.client.execute("window.__leaving = true", vec![]).await.unwrap();
        action.await;
        for _ in 0..200 {
            let state = self
                .client
                .execute(
                    "return window.__leaving === undefined && document.readyState === 'complete'",
                    vec![],
                )
                .await;
            if state.is_ok_and(|v| v == true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the page did not change");
    }

    /// The page's HTML as the browser holds it now.
    pub async fn source(&self) -> String {
        self.client.source().await.unwrap()
    }

    /// The text of `css`.
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }
}
