//! A nats-server with JetStream of the test's own, on a free port with its
//! streams in a temporary directory: it can be killed and started again on
//! the same port and store without touching anyone else's server.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use async_nats::jetstream::{self, stream::Stream};
use custody_indexer::events::subject::STREAM;

/// The nats-server binary: `NATS_SERVER_BIN`, the cache
/// `scripts/install-nats.sh` fills, or `nats-server` on the PATH. Missing,
/// the tests fail: they never skip.
pub fn nats_bin() -> PathBuf {
    super::binary("NATS_SERVER_BIN", "nats-server-2.12.8/bin/nats-server", "nats-server")
        .expect("nats-server not found: run scripts/install-nats.sh (or set NATS_SERVER_BIN)")
}

pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    store: tempfile::TempDir,
    /// While the server is down, a bound socket that does not listen holds
    /// its port: connections are refused, and no other test's listener
    /// can take the port before the server starts again.
    reserved: Option<tokio::net::TcpSocket>,
}

/// A socket bound to a free port of 127.0.0.1 (or to `port`), not listening.
fn try_reserve(port: u16) -> Option<tokio::net::TcpSocket> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    // A killed server's connections linger in TIME_WAIT on its port.
    socket.set_reuseaddr(true).ok()?;
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port))).ok()?;
    Some(socket)
}

impl NatsServer {
    pub async fn start() -> Self {
        let mut server = Self::stopped();
        server.restart().await;
        server
    }

    /// A server on a free port that is not started yet: its URL refuses
    /// connections until [`NatsServer::restart`].
    pub fn stopped() -> Self {
        let socket = try_reserve(0).expect("a free port of 127.0.0.1");
        let port = socket.local_addr().unwrap().port();
        Self { child: None, port, store: tempfile::tempdir().unwrap(), reserved: Some(socket) }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
            // Held again unless something took it meanwhile (then
            // `restart` fails, naming the port).
            self.reserved = try_reserve(self.port);
        }
    }

    /// Starts the server (again) on its port and store, once it listens.
    pub async fn restart(&mut self) {
        self.kill();
        self.reserved = None;
        let mut child = Command::new(nats_bin())
            .args(["--addr", "127.0.0.1", "--port", &self.port.to_string(), "--jetstream", "--store_dir"])
            .arg(self.store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        // Ready when it answers as a NATS server, and it is this one.
        let options = || async_nats::ConnectOptions::new().connection_timeout(Duration::from_secs(1));
        for _ in 0..200 {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("nats-server on port {} exited at start: {status}", self.port);
            }
            if let Ok(client) = options().connect(self.url()).await {
                drop(client);
                self.child = Some(child);
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        panic!("nats-server did not answer on {}", self.port);
    }

    /// The events' stream, as a consumer reads it.
    pub async fn stream(&self) -> Stream {
        let client = async_nats::connect(self.url()).await.unwrap();
        jetstream::new(client).get_stream(STREAM).await.unwrap()
    }

    /// Every message of the stream in its order: `(subject, Nats-Msg-Id, body)`.
    pub async fn messages(&self) -> Vec<(String, String, String)> {
        let mut stream = self.stream().await;
        let info = stream.info().await.unwrap().state.clone();
        let mut out = Vec::new();
        for seq in info.first_sequence..=info.last_sequence {
            if info.messages == 0 {
                break;
            }
            let message = stream.get_raw_message(seq).await.unwrap();
            let id = message.headers.get("Nats-Msg-Id").map(|v| v.as_str().to_string()).unwrap_or_default();
            out.push((message.subject.to_string(), id, String::from_utf8(message.payload.to_vec()).unwrap()));
        }
        out
    }

    /// How many messages the stream holds; 0 before it exists.
    pub async fn count(&self) -> u64 {
        let Ok(client) = async_nats::connect(self.url()).await else { return 0 };
        match jetstream::new(client).get_stream(STREAM).await {
            Ok(mut stream) => stream.info().await.map(|i| i.state.messages).unwrap_or(0),
            Err(_) => 0,
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}
