//! What a command prints: text for people (aligned tables) and one JSON document for scripts.
//! Each command builds both, so the two never drift apart and the JSON shape is decided in
//! one place per command (documented in docs/cli.md).

use std::fmt::Write as _;

use serde_json::Value;

/// A command's result, in both forms.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// For people; printed as is (a newline is added if missing; nothing if empty).
    pub text: String,
    /// For scripts (`--json`).
    pub json: Value,
}

impl Output {
    /// A result with `text` for people and `json` for scripts.
    #[must_use]
    pub fn new(text: impl Into<String>, json: Value) -> Self {
        Self {
            text: text.into(),
            json,
        }
    }

    /// What to print: the JSON on one line, or the text ending with a newline (nothing when
    /// there is no text).
    #[must_use]
    pub fn render(&self, json: bool) -> String {
        if json {
            format!("{}\n", self.json)
        } else if self.text.is_empty() || self.text.ends_with('\n') {
            self.text.clone()
        } else {
            format!("{}\n", self.text)
        }
    }
}

/// A table: a header row and rows of cells, printed with columns aligned (by characters)
/// and two spaces between them; the last column is not padded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    #[must_use]
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|title| (*title).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Whether it has no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, each ending with a newline.
    #[must_use]
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (column, cell) in row.iter().enumerate().take(columns) {
                widths[column] = widths[column].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (column, width) in widths.iter().enumerate() {
                let cell = row.get(column).map_or("", String::as_str);
                if column + 1 == columns {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A JSON value as a table cell: strings bare, `null` empty, others as JSON.
#[must_use]
pub fn cell(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The fields of a JSON object as a two-column table (nested objects flattened with dots).
#[must_use]
pub fn fields_table(object: &Value) -> Table {
    fn flatten(prefix: &str, value: &Value, table: &mut Table) {
        match value {
            Value::Object(map) => {
                for (name, field) in map {
                    let name = if prefix.is_empty() {
                        name.clone()
                    } else {
                        format!("{prefix}.{name}")
                    };
                    flatten(&name, field, table);
                }
            }
            other => table.row(vec![prefix.to_owned(), cell(other)]),
        }
    }
    let mut table = Table::new(&["FIELD", "VALUE"]);
    flatten("", object, &mut table);
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves columns line up whatever the cells' lengths (counted in characters, not bytes).
    #[test]
    fn tables_align() {
        let mut table = Table::new(&["NAME", "ADDRESS", "ROLE"]);
        table.row(vec![
            "a".into(),
            "127.0.0.1:7800".into(),
            "coordinator".into(),
        ]);
        table.row(vec!["ünïcode".into(), "x".into()]);
        assert_eq!(
            table.render(),
            "NAME     ADDRESS         ROLE\n\
             a        127.0.0.1:7800  coordinator\n\
             ünïcode  x\n"
        );
    }

    // Proves nested statistics read as dotted field names.
    #[test]
    fn fields_flatten() {
        let table = fields_table(&serde_json::json!({"hits": 3, "store": {"reads": 1}}));
        assert_eq!(
            table.render(),
            "FIELD        VALUE\nhits         3\nstore.reads  1\n"
        );
    }
}
