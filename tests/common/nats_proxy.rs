//! A TCP proxy in front of a nats-server that loses chosen messages in
//! transit, as a connection cut between a client's writes can: the client
//! sent them, the server never sees them, and what the client sends after
//! them arrives. Server-to-client bytes pass untouched; client-to-server
//! bytes are read as the NATS protocol's lines, and a `PUB`/`HPUB` to a
//! `custody.events.` subject whose turn is in `lose` is dropped whole.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
};

pub struct LossyProxy {
    pub port: u16,
    /// The event messages seen so far, in the order the client sent them.
    seen: Arc<AtomicUsize>,
    /// The turns (0-based, counting event messages) to lose.
    lose: Arc<Mutex<Vec<usize>>>,
    /// How many were lost.
    pub lost: Arc<AtomicUsize>,
}

impl LossyProxy {
    pub async fn start(upstream: u16, lose: Vec<usize>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy =
            Self { port, seen: Arc::default(), lose: Arc::new(Mutex::new(lose)), lost: Arc::default() };
        let (seen, lose, lost) = (proxy.seen.clone(), proxy.lose.clone(), proxy.lost.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else { continue };
                let (seen, lose, lost) = (seen.clone(), lose.clone(), lost.clone());
                tokio::spawn(async move {
                    let (client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
                    let mut reader = BufReader::new(client_read);
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let words: Vec<&str> = line.split_whitespace().collect();
                        let publish = matches!(words.first(), Some(&"PUB") | Some(&"HPUB"));
                        let mut body = Vec::new();
                        if publish {
                            let size: usize = words.last().and_then(|w| w.parse().ok()).unwrap_or(0);
                            body.resize(size + 2, 0);
                            if reader.read_exact(&mut body).await.is_err() {
                                return;
                            }
                            if words.get(1).is_some_and(|s| s.starts_with("custody.events.")) {
                                let turn = seen.fetch_add(1, Ordering::SeqCst);
                                if lose.lock().unwrap().contains(&turn) {
                                    lost.fetch_add(1, Ordering::SeqCst);
                                    continue;
                                }
                            }
                        }
                        if server_write.write_all(line.as_bytes()).await.is_err()
                            || server_write.write_all(&body).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        proxy
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}
