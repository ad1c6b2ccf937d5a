//! [`Client`]: the configuration, the connection pool and each cache's view of the cluster,
//! shared by the [`RemoteCache`]s it opens.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cache::{CacheContext, RemoteCache};
use crate::config::ClientConfig;
use crate::connection::ConnectionSettings;
use crate::error::{Error, Result};
use crate::near::NearCache;
use crate::pool::Pool;
use crate::topology::Routing;

/// A Hot Rod client: connections to the servers, and what it knows of the cluster. Cheap to
/// clone; clones share everything. Must be used within a tokio runtime.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    config: ClientConfig,
    pool: Arc<Pool>,
    /// Each cache's view of the cluster (the topology is per cache).
    routes: Mutex<HashMap<String, Arc<Routing>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("servers", &self.inner.config.servers)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts a client and checks that one of the configured servers answers.
    ///
    /// # Errors
    /// [`Error::Config`] for an unusable configuration; [`Error::NoServerReachable`] when no
    /// configured server answers a PING.
    pub async fn connect(config: ClientConfig) -> Result<Self> {
        config.validate()?;
        let settings = ConnectionSettings {
            version: config.protocol_version,
            intelligence: config.intelligence.code(),
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            in_flight_max: config.in_flight_per_connection_max,
        };
        let pool = Arc::new(Pool::new(settings, config.connections_per_server));
        let mut last = None;
        let mut reached = false;
        for &server in &config.servers {
            match pool.get(server).await {
                Ok(_) => {
                    reached = true;
                    break;
                }
                Err(error) => last = Some(error),
            }
        }
        if !reached {
            return Err(Error::NoServerReachable {
                attempts: u32::try_from(config.servers.len()).unwrap_or(u32::MAX),
                last: Box::new(last.unwrap_or(Error::Closed)),
            });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                pool,
                routes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The configuration in force.
    #[must_use]
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The protocol version spoken with `server` (the lower of the configured one and the
    /// server's), once a connection to it is open.
    ///
    /// # Errors
    /// If no connection to it can be opened.
    pub async fn protocol_version(&self, server: std::net::SocketAddr) -> Result<u8> {
        Ok(self.inner.pool.get(server).await?.version())
    }

    /// The newest protocol version `server` said it speaks.
    ///
    /// # Errors
    /// If no connection to it can be opened.
    pub async fn server_protocol_version(
        &self,
        server: std::net::SocketAddr,
    ) -> Result<Option<u8>> {
        Ok(self.inner.pool.get(server).await?.server_version())
    }

    /// Opens cache `name` (empty: the server's default cache), checking that it exists, and
    /// starts its near cache when the configuration has one. Its first request also brings
    /// the cluster's topology for it.
    ///
    /// # Errors
    /// [`Error::CacheNotFound`] if the server has no such cache, or the PING's failure.
    pub async fn cache(&self, name: &str) -> Result<RemoteCache> {
        let config = &self.inner.config;
        let routing = Arc::clone(
            self.inner
                .routes
                .lock()
                .entry(name.to_owned())
                .or_insert_with(|| Arc::new(Routing::new(config.servers.clone()))),
        );
        let context = Arc::new(CacheContext {
            name: name.to_owned(),
            routing,
            settings: self.inner.pool.settings().clone(),
            key_type: config.key_media_type.clone(),
            value_type: config.value_media_type.clone(),
            retries_max: config.retries_max,
            retry_backoff: config.retry_backoff,
            listener_queue_capacity: config.listener_queue_capacity,
        });
        // Check the cache exists before starting anything for it.
        let probe = RemoteCache::new(Arc::clone(&context), Arc::clone(&self.inner.pool), None);
        probe.ping().await?;
        drop(probe);
        let near = config.near_cache.map(|near| Arc::new(NearCache::new(near)));
        Ok(RemoteCache::new(
            context,
            Arc::clone(&self.inner.pool),
            near,
        ))
    }

    /// Closes every connection; requests in flight fail. Caches opened from this client fail
    /// over to new connections if used again.
    pub fn close(&self) {
        self.inner.pool.close_all();
    }
}
