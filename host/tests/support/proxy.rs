//! A TCP proxy between one host and the API server that a test can cut, to model a
//! replica partitioned from the control plane while everything else keeps running.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Forwards connections to `upstream` until cut. A cut stops forwarding without
/// closing anything: requests in flight and new connections hang, as across a network
/// partition. Healing closes the hung connections and forwards new ones again.
pub struct Proxy {
    address: SocketAddr,
    cut: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port.
    pub async fn start(upstream: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (cut, watch_cut) = watch::channel(false);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, upstream, watch_cut.clone()));
            }
        });
        Ok(Proxy {
            address,
            cut,
            accept,
        })
    }

    /// Stops forwarding; every connection hangs from now on.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Closes the hung connections and forwards new ones.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }

    /// A copy of `kubeconfig` whose server is this proxy, written to `dir`.
    pub fn kubeconfig(&self, kubeconfig: &Path, dir: &Path) -> Result<PathBuf> {
        let text = std::fs::read_to_string(kubeconfig)?;
        let rewritten: Vec<String> = text
            .lines()
            .map(|line| match line.trim_start().strip_prefix("server: ") {
                Some(_) => format!("    server: https://{}", self.address),
                None => line.to_string(),
            })
            .collect();
        let path = dir.join("through-proxy.kubeconfig");
        std::fs::write(&path, rewritten.join("\n"))?;
        Ok(path)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr, mut cut: watch::Receiver<bool>) {
    if *cut.borrow() {
        let _ = cut.wait_for(|c| !*c).await;
        return; // connected during a cut: closed on healing, never forwarded
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let was_cut = tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
        _ = cut.wait_for(|c| *c) => true,
    };
    if was_cut {
        // Hold both ends without reading or writing until healed.
        let _ = cut.wait_for(|c| !*c).await;
    }
}

/// The `host:port` of the API server in `kubeconfig`.
pub fn server_address(kubeconfig: &Path) -> Result<SocketAddr> {
    let text = std::fs::read_to_string(kubeconfig)?;
    let server = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("server: https://"))
        .context("no https server in the kubeconfig")?;
    Ok(server.trim().parse()?)
}
