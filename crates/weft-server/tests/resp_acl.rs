//! Redis ACL users over real sockets: ACL SETUSER and friends, AUTH as an ACL user, and the
//! command, key and channel rules checked on every command (in MULTI and in scripts too).

#![allow(clippy::unwrap_used)]

mod common;

use common::{Frame, TestServer};

/// An error's text, or a string's.
fn message(frame: &Frame) -> String {
    match frame {
        Frame::Error(text) => text.clone(),
        Frame::Integer(n) => n.to_string(),
        Frame::Bulk(_) | Frame::Simple(_) => frame.text(),
        _ => String::new(),
    }
}

fn has(frame: &Frame, text: &str) -> bool {
    frame.items().iter().any(|item| item.text() == text)
}

// Proves a user made by ACL SETUSER authenticates with its password only once on, runs only
// the commands, keys and channels its rules grant (NOPERM otherwise, counted in errorstats),
// and that GETUSER, LIST, USERS, WHOAMI and DRYRUN describe it as Redis does.
#[test]
fn users_are_made_authenticated_and_restricted() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(admin.cmd("ACL WHOAMI"), Frame::bulk("default"));
    assert_eq!(
        admin.cmd("ACL SETUSER bob >123 +@string ~x* &news.*"),
        Frame::ok()
    );
    let mut bob = server.client();
    assert_eq!(
        bob.cmd("AUTH bob 123"),
        Frame::error("WRONGPASS invalid username-password pair or user is disabled."),
        "new users are off"
    );
    assert_eq!(admin.cmd("ACL SETUSER bob on"), Frame::ok());
    assert!(matches!(bob.cmd("AUTH bob 124"), Frame::Error(_)));
    assert_eq!(bob.cmd("AUTH bob 123"), Frame::ok());
    assert_eq!(
        bob.cmd("ACL WHOAMI"),
        Frame::error("NOPERM this user has no permissions to run the 'acl|whoami' command")
    );
    assert_eq!(bob.cmd("SET x1 v"), Frame::ok());
    assert_eq!(bob.cmd("GET x1"), Frame::bulk("v"));
    assert_eq!(
        bob.cmd("SET y1 v"),
        Frame::error(
            "NOPERM this user has no permissions to access one of the keys used as arguments"
        )
    );
    assert_eq!(
        bob.cmd("HSET x2 f v"),
        Frame::error("NOPERM this user has no permissions to run the 'hset' command")
    );
    assert_eq!(
        bob.cmd("CONFIG GET maxmemory"),
        Frame::error("NOPERM this user has no permissions to run the 'config|get' command")
    );
    assert_eq!(
        bob.cmd("PING"),
        Frame::error("NOPERM this user has no permissions to run the 'ping' command")
    );
    // Refused commands are queued as errors: EXEC aborts.
    assert_eq!(
        admin.cmd("ACL SETUSER bob +multi +exec +publish"),
        Frame::ok()
    );
    assert_eq!(bob.cmd("MULTI"), Frame::ok());
    assert!(matches!(bob.cmd("HGET x1 f"), Frame::Error(_)));
    assert!(message(&bob.cmd("EXEC")).starts_with("EXECABORT"));
    assert_eq!(bob.cmd("PUBLISH news.a hi"), Frame::Integer(0));
    assert_eq!(
        bob.cmd("PUBLISH sport hi"),
        Frame::error(
            "NOPERM this user has no permissions to access one of the channels used as arguments"
        )
    );
    // Rules change at once for connections already authenticated.
    assert_eq!(admin.cmd("ACL SETUSER bob -get"), Frame::ok());
    assert!(matches!(bob.cmd("GET x1"), Frame::Error(_)));

    let info = admin.cmd("INFO errorstats").text();
    assert!(info.contains("errorstat_NOPERM:count="), "{info}");

    let details = admin.cmd("ACL GETUSER bob");
    let items = details.items();
    let field = |name: &str| {
        let at = items.iter().position(|i| message(i) == name).unwrap();
        items[at + 1].clone()
    };
    assert!(has(&field("flags"), "on"));
    assert_eq!(
        field("passwords").items()[0].text(),
        "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3"
    );
    assert_eq!(field("keys").text(), "~x*");
    assert_eq!(field("channels").text(), "&news.*");
    assert_eq!(
        field("commands").text(),
        "-@all +@string +multi +exec +publish -get"
    );
    assert_eq!(admin.cmd("ACL GETUSER nobody"), Frame::NullBulk);
    assert!(has(&admin.cmd("ACL USERS"), "bob"));
    assert!(has(
        &admin.cmd("ACL LIST"),
        "user default on nopass sanitize-payload ~* &* +@all"
    ));
    assert_eq!(admin.cmd("ACL DRYRUN bob SET x9 v"), Frame::ok());
    assert_eq!(
        admin.cmd("ACL DRYRUN bob SET y9 v"),
        Frame::bulk("This user has no permissions to access the 'y9' key")
    );
    assert_eq!(
        admin.cmd("ACL DRYRUN nobody GET x"),
        Frame::error("ERR User 'nobody' not found")
    );
}

// Proves bad modifiers are refused with Redis' words and change nothing, and that the ACL log
// records refusals (grouped) and failed AUTHs.
#[test]
fn bad_rules_change_nothing_and_refusals_are_logged() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(
        admin.cmd("ACL SETUSER carol on nopass +get ~*"),
        Frame::ok()
    );
    assert_eq!(
        admin.cmd("ACL SETUSER carol off +nosuch"),
        Frame::error(
            "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
        )
    );
    assert_eq!(
        admin.cmd("ACL SETUSER carol ~k*"),
        Frame::error(
            "ERR Error in ACL SETUSER modifier '~k*': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
        )
    );
    assert_eq!(
        admin.cmd("ACL SETUSER carol (+get"),
        Frame::error("ERR Unmatched parenthesis in acl selector starting at '(+get'.")
    );
    assert_eq!(
        admin.call(&["ACL", "SETUSER", "a b", "on"]),
        Frame::error("ERR Usernames can't contain spaces or null characters")
    );
    let mut carol = server.client();
    assert_eq!(
        carol.cmd("AUTH carol anything"),
        Frame::ok(),
        "still on, nopass"
    );
    assert!(matches!(carol.cmd("SET k v"), Frame::Error(_)));
    assert!(matches!(carol.cmd("SET k v"), Frame::Error(_)));
    assert!(matches!(carol.cmd("AUTH carol2 x"), Frame::Error(_)));
    let log = admin.cmd("ACL LOG");
    let entries = log.items();
    assert_eq!(entries.len(), 2, "{log:?}");
    let fields = |entry: &Frame| -> Vec<String> { entry.items().iter().map(message).collect() };
    let auth = fields(&entries[0]);
    assert_eq!(&auth[2..4], ["reason", "auth"]);
    assert_eq!(&auth[8..10], ["username", "carol2"]);
    let set = fields(&entries[1]);
    assert_eq!(&set[0..2], ["count", "2"]);
    assert_eq!(
        &set[2..8],
        ["reason", "command", "context", "toplevel", "object", "set"]
    );
    assert_eq!(admin.cmd("ACL LOG RESET"), Frame::ok());
    assert_eq!(admin.cmd("ACL LOG"), Frame::Array(vec![]));
    assert!(admin.cmd("ACL CAT").items().len() >= 21);
    assert!(has(&admin.cmd("ACL CAT scripting"), "eval"));
    assert_eq!(admin.cmd("ACL GENPASS").text().len(), 64);
    assert_eq!(admin.cmd("ACL GENPASS 5").text().len(), 2);
    assert!(matches!(admin.cmd("ACL GENPASS 0"), Frame::Error(_)));
    assert_eq!(
        admin.cmd("ACL DELUSER default"),
        Frame::error("ERR The 'default' user cannot be removed")
    );
    assert!(matches!(admin.cmd("ACL SAVE"), Frame::Error(_)));
}

// Proves a script runs its commands as the calling user (redis.acl_check_cmd answers for it),
// ACL DELUSER closes the user's connections, and turning `default` off makes new connections
// authenticate.
#[test]
fn scripts_deletion_and_the_default_user() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(
        admin.cmd("ACL SETUSER bob on >123 +@scripting +set ~x*"),
        Frame::ok()
    );
    let mut bob = server.client();
    assert_eq!(bob.cmd("AUTH bob 123"), Frame::ok());
    let check = |bob: &mut common::Client, script: &str, keys: &[&str]| {
        let numkeys = keys.len().to_string();
        let mut args = vec!["EVAL", script, &numkeys];
        args.extend(keys);
        bob.call(&args)
    };
    assert_eq!(
        check(
            &mut bob,
            "return redis.acl_check_cmd('set','xx',1)",
            &["xx"]
        ),
        Frame::Integer(1)
    );
    assert_eq!(
        check(
            &mut bob,
            "return redis.acl_check_cmd('hset','xx','f',1)",
            &["xx"]
        ),
        Frame::NullBulk
    );
    assert_eq!(
        check(&mut bob, "return redis.acl_check_cmd('set','yy',1)", &[]),
        Frame::NullBulk
    );
    assert!(
        message(&check(
            &mut bob,
            "return redis.acl_check_cmd('nope','x')",
            &[]
        ))
        .contains("Invalid command passed to redis.acl_check_cmd()")
    );
    let refused = check(&mut bob, "return redis.call('get','xx')", &["xx"]);
    assert!(
        message(&refused)
            .contains("The user executing the script can't run this command or subcommand"),
        "{refused:?}"
    );
    assert_eq!(
        check(&mut bob, "return redis.call('set','xx','1')", &["xx"]),
        Frame::ok()
    );

    assert_eq!(admin.cmd("ACL DELUSER bob nobody"), Frame::Integer(1));
    assert!(
        bob.closed_by_server(),
        "DELUSER closes the user's connections"
    );

    assert_eq!(admin.cmd("ACL SETUSER default off"), Frame::ok());
    let mut fresh = server.client();
    assert_eq!(
        fresh.cmd("GET x"),
        Frame::error("NOAUTH Authentication required.")
    );
    assert_eq!(admin.cmd("ACL SETUSER default on"), Frame::ok());
    let mut again = server.client();
    assert_eq!(again.cmd("SET x 1"), Frame::ok());
    assert_eq!(
        again.cmd("AUTH onlypassword"),
        Frame::error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
        )
    );
    assert_eq!(admin.cmd("CONFIG SET requirepass s3cret"), Frame::ok());
    let mut locked = server.client();
    assert_eq!(
        locked.cmd("GET x"),
        Frame::error("NOAUTH Authentication required.")
    );
    assert_eq!(locked.cmd("AUTH s3cret"), Frame::ok());
    assert_eq!(locked.cmd("GET x"), Frame::bulk("1"));
}

// Proves COMMAND reports Redis' ACL categories and key-spec flags.
#[test]
fn command_reports_categories_and_key_flags() {
    let server = TestServer::start();
    let mut c = server.client();
    let info = c.cmd("COMMAND INFO get").items()[0].items();
    let categories: Vec<String> = info[6].items().iter().map(Frame::text).collect();
    assert_eq!(categories, ["@read", "@string", "@fast"]);
    let keys = c.cmd("COMMAND GETKEYSANDFLAGS LMOVE k1 k2 left right");
    assert_eq!(
        keys.items()[0].items()[1]
            .items()
            .iter()
            .map(Frame::text)
            .collect::<Vec<_>>(),
        ["RW", "access", "delete"]
    );
    assert!(has(
        &c.cmd("COMMAND LIST FILTERBY ACLCAT scripting"),
        "eval"
    ));
    assert!(has(&c.cmd("COMMAND LIST"), "client|list"));
}

// Proves ACL SETUSER closes the user's subscribers whose channels or patterns it no longer
// grants, and spares those it still does.
#[test]
fn revoked_channels_close_their_subscribers() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(
        admin.cmd("ACL SETUSER psub on nopass +@all ~* resetchannels &news.* &sport"),
        Frame::ok()
    );
    let mut news = server.client();
    assert_eq!(news.cmd("AUTH psub x"), Frame::ok());
    assert_eq!(news.cmd("SUBSCRIBE news.a").items().len(), 3);
    let mut sport = server.client();
    assert_eq!(sport.cmd("AUTH psub x"), Frame::ok());
    assert_eq!(sport.cmd("PSUBSCRIBE sport").items().len(), 3);
    assert_eq!(
        admin.cmd("ACL SETUSER psub resetchannels &sport"),
        Frame::ok()
    );
    assert!(news.closed_by_server(), "news.a is no longer granted");
    assert_eq!(admin.cmd("PUBLISH sport goal"), Frame::Integer(1));
    let message = sport.read_frame();
    assert_eq!(message.items().len(), 4, "{message:?}");
}
