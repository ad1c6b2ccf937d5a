//! Hot Rod administration tasks on a server that is not clustered: caches created from
//! Infinispan's templates are the kind the template names, unknown and unsupported templates
//! are refused with Infinispan's errors (nothing is created), and the templates task lists
//! exactly the templates that work.

#![allow(clippy::unwrap_used)]

mod common;

use common::TestServer;
use common::hotrod::{HotRod, exec};
use weft_core::{CacheMode, Replication};
use weft_hotrod::Status;

// Proves `@@cache@create` with a template makes the cache the template names, and
// `@@cache@getorcreate`, `@@cache@remove` and a second create behave as Infinispan's.
#[test]
fn templates_create_what_they_name() {
    let server = TestServer::start();
    let manager = server.manager();
    let mut client = HotRod::connect(server.addr, 40);
    for (name, template, mode, replication) in [
        (
            "d",
            "org.infinispan.DIST_SYNC",
            CacheMode::Distributed,
            Replication::Sync,
        ),
        (
            "da",
            "org.infinispan.DIST_ASYNC",
            CacheMode::Distributed,
            Replication::Async,
        ),
        (
            "r",
            "org.infinispan.REPL_SYNC",
            CacheMode::Replicated,
            Replication::Sync,
        ),
        (
            "ra",
            "org.infinispan.REPL_ASYNC",
            CacheMode::Replicated,
            Replication::Async,
        ),
        (
            "l",
            "org.infinispan.LOCAL",
            CacheMode::Local,
            Replication::Sync,
        ),
    ] {
        let response = client.call(exec(
            "@@cache@create",
            &[("name", name), ("template", template)],
        ));
        assert_eq!(
            response.status(),
            Status::Success,
            "{template}: {response:?}"
        );
        let cache = manager.cache(name).unwrap();
        assert_eq!(
            (cache.config().mode, cache.config().replication),
            (mode, replication),
            "{template}"
        );
    }
    let again = client.call(exec(
        "@@cache@create",
        &[("name", "d"), ("template", "org.infinispan.DIST_SYNC")],
    ));
    assert!(again.error_message().contains("ISPN000507"), "{again:?}");
    let existing = client.call(exec(
        "@@cache@getorcreate",
        &[("name", "d"), ("template", "org.infinispan.LOCAL")],
    ));
    assert_eq!(existing.status(), Status::Success);
    assert_eq!(
        manager.cache("d").unwrap().config().mode,
        CacheMode::Distributed
    );
    // What the 15.x Java client sends for DIST_SYNC: the template's configuration.
    let sent = client.call(exec(
        "@@cache@getorcreate",
        &[
            ("name", "java"),
            (
                "configuration",
                r#"{"distributed-cache":{"mode":"sync","statistics":"true"}}"#,
            ),
        ],
    ));
    assert_eq!(sent.status(), Status::Success, "{sent:?}");
    assert_eq!(
        manager.cache("java").unwrap().config().mode,
        CacheMode::Distributed
    );
    let removed = client.call(exec("@@cache@remove", &[("name", "d")]));
    assert_eq!(removed.status(), Status::Success);
    assert!(manager.cache("d").is_none());
}

// Proves an unknown template is Infinispan's ISPN000436 error, an invalidation template is
// refused as unsupported, and neither creates a cache.
#[test]
fn unknown_and_unsupported_templates_are_refused() {
    let server = TestServer::start();
    let manager = server.manager();
    let mut client = HotRod::connect(server.addr, 40);
    let unknown = client.call(exec(
        "@@cache@create",
        &[("name", "u"), ("template", "org.infinispan.NOPE")],
    ));
    let message = unknown.error_message();
    assert!(
        message.starts_with(
            "org.infinispan.commons.CacheConfigurationException: ISPN000436: Cache 'org.infinispan.NOPE'"
        ),
        "{message}"
    );
    let invalidation = client.call(exec(
        "@@cache@getorcreate",
        &[
            ("name", "u"),
            ("template", "org.infinispan.INVALIDATION_SYNC"),
        ],
    ));
    assert!(
        invalidation.error_message().contains("does not support"),
        "{invalidation:?}"
    );
    let configured = client.call(exec(
        "@@cache@create",
        &[
            ("name", "u"),
            ("configuration", r#"{"invalidation-cache":{"mode":"sync"}}"#),
        ],
    ));
    assert!(
        configured.error_message().contains("not supported"),
        "{configured:?}"
    );
    assert!(manager.cache("u").is_none());
    let templates = client.call(exec("@@cache@templates", &[]));
    let listed: Vec<String> = serde_json::from_slice(&templates.value()).unwrap();
    assert_eq!(listed, weft_core::config::TEMPLATES);
}
