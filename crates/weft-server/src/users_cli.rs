//! `weft user create|password|groups|remove|list`: edits a users file (see
//! `weft_security::users`) as Infinispan's `user` command edits its realm. A running server
//! picks the changes up by itself.

use std::path::Path;

use anyhow::{Context, bail};
use weft_security::users::{User, Users};

fn load(file: &Path) -> anyhow::Result<Users> {
    Users::load(file).with_context(|| format!("read the users file {}", file.display()))
}

fn save(users: &Users, file: &Path) -> anyhow::Result<()> {
    users
        .save(file)
        .with_context(|| format!("write the users file {}", file.display()))
}

/// Adds user `name`; refuses a name already there.
///
/// # Errors
/// If the user exists, the name, password or a group is invalid, or the file cannot be read
/// or written.
pub fn create(
    file: &Path,
    name: &str,
    password: &str,
    groups: Vec<String>,
) -> anyhow::Result<String> {
    let mut users = load(file)?;
    if users.get(name).is_some() {
        bail!(
            "user `{name}` exists in {}: change it with `weft user password` or `weft user groups`",
            file.display()
        );
    }
    let user = User::new(name, password, groups)?;
    let groups = group_list(&user);
    users.insert(user);
    save(&users, file)?;
    Ok(format!(
        "created user `{name}` ({groups}) in {}\n",
        file.display()
    ))
}

/// Sets user `name`'s password.
///
/// # Errors
/// If there is no such user, the password is empty, or the file cannot be read or written.
pub fn password(file: &Path, name: &str, password: &str) -> anyhow::Result<String> {
    let mut users = load(file)?;
    let Some(user) = users.get_mut(name) else {
        bail!("no user `{name}` in {}", file.display());
    };
    user.set_password(password)?;
    save(&users, file)?;
    Ok(format!("changed the password of `{name}`\n"))
}

/// Sets user `name`'s groups.
///
/// # Errors
/// If there is no such user, a group is invalid, or the file cannot be read or written.
pub fn groups(file: &Path, name: &str, groups: Vec<String>) -> anyhow::Result<String> {
    let mut users = load(file)?;
    let Some(user) = users.get_mut(name) else {
        bail!("no user `{name}` in {}", file.display());
    };
    user.set_groups(groups)?;
    let list = group_list(user);
    save(&users, file)?;
    Ok(format!("user `{name}` is now in: {list}\n"))
}

/// Removes user `name`.
///
/// # Errors
/// If there is no such user, or the file cannot be read or written.
pub fn remove(file: &Path, name: &str) -> anyhow::Result<String> {
    let mut users = load(file)?;
    if users.remove(name).is_none() {
        bail!("no user `{name}` in {}", file.display());
    }
    save(&users, file)?;
    Ok(format!("removed user `{name}`\n"))
}

/// The users and their groups, a line each.
///
/// # Errors
/// If the file cannot be read.
pub fn list(file: &Path) -> anyhow::Result<String> {
    let users = load(file)?;
    if users.is_empty() {
        return Ok(format!("no users in {}\n", file.display()));
    }
    Ok(users
        .iter()
        .map(|user| format!("{}\t{}\n", user.name, group_list(user)))
        .collect())
}

/// Runs `weft cli`'s `user …` commands (the shell cannot edit a users file by itself:
/// REST has no users API, and the file lives beside the server).
///
/// # Errors
/// What the command's function above says, as text.
pub fn shell_command(
    command: &weft_cli::command::UserCommand,
) -> Result<weft_cli::output::Output, String> {
    use weft_cli::command::UserCommand;
    let done = |name: &str, text: anyhow::Result<String>| {
        let text = text.map_err(|error| format!("{error:#}"))?;
        let json = serde_json::json!({"user": name, "done": text.trim_end()});
        Ok(weft_cli::output::Output::new(text, json))
    };
    match command {
        UserCommand::Create {
            name,
            password,
            groups,
            users_file,
        } => done(name, create(users_file, name, password, groups.clone())),
        UserCommand::Password {
            name,
            password,
            users_file,
        } => done(name, self::password(users_file, name, password)),
        UserCommand::Groups {
            name,
            groups,
            users_file,
        } => done(name, self::groups(users_file, name, groups.clone())),
        UserCommand::Remove { name, users_file } => done(name, remove(users_file, name)),
        UserCommand::List { users_file } => {
            let text = list(users_file).map_err(|error| format!("{error:#}"))?;
            let users = load(users_file).map_err(|error| format!("{error:#}"))?;
            let json: Vec<serde_json::Value> = users
                .iter()
                .map(|user| serde_json::json!({"name": user.name, "groups": user.groups}))
                .collect();
            Ok(weft_cli::output::Output::new(
                text,
                serde_json::json!({ "users": json }),
            ))
        }
    }
}

fn group_list(user: &User) -> String {
    if user.groups.is_empty() {
        "no groups".to_owned()
    } else {
        user.groups.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the commands create, change, list and remove users in the file, refuse what
    // makes no sense, and never write a password.
    #[test]
    fn user_commands_edit_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("users.toml");
        let out = create(&file, "alice", "s3cret-pw", vec!["admin".into()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.contains("created user `alice` (admin)"), "{out}");
        assert!(
            create(&file, "alice", "x", vec![]).is_err(),
            "created twice"
        );
        create(
            &file,
            "bob",
            "other-pw",
            vec!["observer".into(), "application".into()],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            list(&file).unwrap_or_else(|e| panic!("{e}")),
            "alice\tadmin\nbob\tapplication,observer\n"
        );
        groups(&file, "bob", vec!["monitor".into()]).unwrap_or_else(|e| panic!("{e}"));
        password(&file, "alice", "n3w-pw").unwrap_or_else(|e| panic!("{e}"));
        assert!(password(&file, "carol", "pw").is_err());
        assert!(groups(&file, "alice", vec!["bad group".into()]).is_err());
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("s3cret-pw") && !text.contains("n3w-pw"));
        let realm = weft_security::users::Realm::open(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(realm.authenticate_password("alice", b"n3w-pw").is_some());
        assert!(realm.authenticate_password("alice", b"s3cret-pw").is_none());
        remove(&file, "bob").unwrap_or_else(|e| panic!("{e}"));
        assert!(remove(&file, "bob").is_err());
        assert_eq!(
            list(&file).unwrap_or_else(|e| panic!("{e}")),
            "alice\tadmin\n"
        );
    }
}
