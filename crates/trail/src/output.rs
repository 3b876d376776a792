//! Owns the output formats of `auditctl`: `jsonl` (one JSON object per row), `csv` (for pipes)
//! and `table` (for a terminal, with a text asked for in full printed under its row), written row
//! by row as rows arrive (docs/architecture.md "The crates", trail). Must not know where rows come
//! from.

use std::io::{self, Write};
use std::marker::PhantomData;

use comfy_table::{ContentArrangement, Table, presets};
use serde_json::Value;

/// How rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal, long text truncated; a text asked for in full (a body)
    /// under its row.
    Table,
    /// One JSON object per line, every attribute, numbers with their exact digits.
    Jsonl,
    /// Comma-separated values with a header line (RFC 4180 quoting).
    Csv,
}

/// A column: its name, and its width in the table format (`None`: not in the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub table_width: Option<usize>,
}

impl Column {
    /// The width of its table cells: at least the header's, so that chunks without a header
    /// line up with the first.
    fn cell_width(&self) -> Option<usize> {
        self.table_width
            .map(|width| width.max(self.name.chars().count()))
    }
}

/// A text the table prints in full under its row, byte for byte, between two marker lines, instead
/// of in a cell (which would cut it): `--- NAME of OF, N bytes ---`, the text, a line break, and
/// `--- end of NAME ---`.
pub struct Block {
    /// What the text is (its column, which the table leaves out).
    pub name: &'static str,
    /// Whose it is (the row's id).
    pub of: String,
    pub text: String,
}

/// Something printed as one row.
pub trait Record {
    const COLUMNS: &'static [Column];
    /// The whole row as JSON.
    fn json(&self) -> Value;
    /// The row's line in the `jsonl` format (without the newline): its JSON unless the record
    /// has a line of its own.
    fn line(&self) -> String {
        self.json().to_string()
    }
    /// One text per column of `COLUMNS`, in full (the `csv` format; the table truncates).
    fn cells(&self) -> Vec<String>;
    /// A text the table prints in full under the row (a column without a table width).
    fn block(&self) -> Option<Block> {
        None
    }
    /// The table's columns to leave out first when the table must fit a width (`Printer::fit`),
    /// in that order; then the others from the right, the first column never.
    const DROP_FIRST: &'static [&'static str] = &[];
}

/// Rows of the table format rendered together: fixed column widths make chunks line up into one
/// table, so rows appear while the rest is still being read.
const TABLE_CHUNK: usize = 50;

/// Writes records of one kind in one format.
pub struct Printer<W: Write, R: Record> {
    format: Format,
    out: W,
    pending: Vec<Vec<String>>,
    header_done: bool,
    rows: u64,
    /// Which of `R::COLUMNS` the table shows (all that have a table width, unless fitted).
    shown: Vec<bool>,
    kind: PhantomData<R>,
}

impl<W: Write, R: Record> Printer<W, R> {
    pub fn new(format: Format, out: W) -> Self {
        Self {
            format,
            out,
            pending: Vec::new(),
            header_done: false,
            rows: 0,
            shown: R::COLUMNS.iter().map(|c| c.table_width.is_some()).collect(),
            kind: PhantomData,
        }
    }

    /// The table fitted to `width` characters a line: columns left out as `R::DROP_FIRST` says
    /// until it fits (or one column is left). Returns the names of those left out.
    pub fn fit(&mut self, width: usize) -> Vec<&'static str> {
        let line = |shown: &[bool]| -> usize {
            1 + R::COLUMNS
                .iter()
                .zip(shown)
                .filter(|(_, shown)| **shown)
                .filter_map(|(column, _)| column.cell_width())
                .map(|w| w + 3)
                .sum::<usize>()
        };
        let by_name = |name: &str| R::COLUMNS.iter().position(|c| c.name == name);
        let order: Vec<usize> = R::DROP_FIRST
            .iter()
            .filter_map(|name| by_name(name))
            .chain((1..R::COLUMNS.len()).rev())
            .collect();
        let mut dropped = Vec::new();
        for index in order {
            if line(&self.shown) <= width {
                break;
            }
            if self.shown[index] {
                self.shown[index] = false;
                dropped.push(R::COLUMNS[index].name);
            }
        }
        dropped
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn print(&mut self, record: &R) -> io::Result<()> {
        self.rows += 1;
        match self.format {
            Format::Jsonl => {
                self.out.write_all(record.line().as_bytes())?;
                self.out.write_all(b"\n")
            }
            Format::Csv => {
                self.csv_header()?;
                csv_line(&mut self.out, record.cells())
            }
            Format::Table => {
                let cells = record.cells();
                let row = R::COLUMNS
                    .iter()
                    .zip(&self.shown)
                    .zip(cells)
                    .filter(|((_, shown), _)| **shown)
                    .filter_map(|((column, _), cell)| column.cell_width().map(|w| fit(&cell, w)))
                    .collect();
                self.pending.push(row);
                if let Some(block) = record.block() {
                    self.table_chunk()?;
                    writeln!(
                        self.out,
                        "--- {} of {}, {} bytes ---",
                        block.name,
                        block.of,
                        block.text.len()
                    )?;
                    self.out.write_all(block.text.as_bytes())?;
                    writeln!(self.out, "\n--- end of {} ---", block.name)?;
                } else if self.pending.len() >= TABLE_CHUNK {
                    self.table_chunk()?;
                }
                Ok(())
            }
        }
    }

    /// Writes what is pending (and the header when there were no rows) and flushes.
    pub fn finish(&mut self) -> io::Result<()> {
        match self.format {
            Format::Csv => self.csv_header()?,
            Format::Table => self.table_chunk()?,
            Format::Jsonl => {}
        }
        self.out.flush()
    }

    /// Flushes what is written so far (the table keeps its pending chunk).
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn csv_header(&mut self) -> io::Result<()> {
        if !self.header_done {
            self.header_done = true;
            csv_line(
                &mut self.out,
                R::COLUMNS.iter().map(|c| c.name.to_owned()).collect(),
            )?;
        }
        Ok(())
    }

    fn table_chunk(&mut self) -> io::Result<()> {
        if self.header_done && self.pending.is_empty() {
            return Ok(());
        }
        let shown: Vec<&Column> = R::COLUMNS
            .iter()
            .zip(&self.shown)
            .filter(|(c, shown)| **shown && c.table_width.is_some())
            .map(|(c, _)| c)
            .collect();
        let mut table = Table::new();
        table
            .load_preset(presets::ASCII_MARKDOWN)
            .set_content_arrangement(ContentArrangement::Disabled);
        if !self.header_done {
            table.set_header(shown.iter().map(|c| c.name));
            self.header_done = true;
        }
        table.add_rows(self.pending.drain(..));
        for line in table.lines() {
            writeln!(self.out, "{line}")?;
        }
        Ok(())
    }
}

/// Exactly `width` characters on one line, so that every chunk has the same column widths:
/// control characters become spaces, a cut ends in `…`, short text is padded.
fn fit(text: &str, width: usize) -> String {
    let clean = text.chars().map(|c| if c.is_control() { ' ' } else { c });
    let length = text.chars().count();
    if length <= width {
        let mut cell: String = clean.collect();
        cell.extend(std::iter::repeat_n(' ', width - length));
        return cell;
    }
    let mut cut: String = clean.take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The first characters that make a spreadsheet read a cell as a formula (or, for a tab and a
/// carriage return, hide one): a cell starting with one is written after a `'`, so that an
/// export opened in a spreadsheet shows the text and runs nothing (docs/auditctl.md "Reading the trail").
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A cell as a spreadsheet should take it: inert (see `FORMULA_STARTS`).
fn inert(field: &str) -> std::borrow::Cow<'_, str> {
    if field.starts_with(FORMULA_STARTS) {
        format!("'{field}").into()
    } else {
        field.into()
    }
}

/// One CSV line: a field is quoted when it holds a comma, a quote, or a line break, quotes
/// doubled (RFC 4180), and made inert first (`inert`). Hand-written: these lines are all of CSV
/// that output needs, where the csv crate would add a dependency (and CI build time) for them.
fn csv_line<W: Write>(out: &mut W, fields: Vec<String>) -> io::Result<()> {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let field = inert(field);
        if field.contains([',', '"', '\n', '\r']) {
            write!(out, "\"{}\"", field.replace('"', "\"\""))?;
        } else {
            out.write_all(field.as_bytes())?;
        }
    }
    out.write_all(b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pair(&'static str, &'static str);

    impl Record for Pair {
        const COLUMNS: &'static [Column] = &[
            Column {
                name: "a",
                table_width: Some(6),
            },
            Column {
                name: "hidden",
                table_width: None,
            },
        ];
        fn json(&self) -> Value {
            serde_json::json!({"a": self.0, "hidden": self.1})
        }
        fn cells(&self) -> Vec<String> {
            vec![self.0.to_owned(), self.1.to_owned()]
        }
    }

    fn printed(format: Format, rows: &[Pair]) -> String {
        let mut printer = Printer::<Vec<u8>, Pair>::new(format, Vec::new());
        for row in rows {
            printer.print(row).unwrap();
        }
        printer.finish().unwrap();
        String::from_utf8(printer.out).unwrap()
    }

    #[test]
    fn csv_quotes_commas_quotes_and_line_breaks() {
        assert_eq!(
            printed(
                Format::Csv,
                &[Pair("plain", "a,b"), Pair("say \"hi\"", "two\nlines")]
            ),
            "a,hidden\r\nplain,\"a,b\"\r\n\"say \"\"hi\"\"\",\"two\nlines\"\r\n"
        );
        assert_eq!(
            printed(Format::Csv, &[]),
            "a,hidden\r\n",
            "a header even when empty"
        );
    }

    #[test]
    fn csv_cells_that_a_spreadsheet_would_run_start_with_a_quote_and_others_are_as_they_are() {
        assert_eq!(
            printed(
                Format::Csv,
                &[
                    Pair("=HYPERLINK(\"http://x\",\"y\")", "+1"),
                    Pair("-2", "@SUM(A1)"),
                    Pair("\tx", "\r=1"),
                    Pair("a=b", "x-y"),
                ]
            ),
            "a,hidden\r\n\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",'+1\r\n'-2,'@SUM(A1)\r\n'\tx,\"'\r=1\"\r\na=b,x-y\r\n"
        );
    }

    #[test]
    fn jsonl_is_one_object_per_line() {
        assert_eq!(
            printed(Format::Jsonl, &[Pair("x", "y"), Pair("z", "w")]),
            "{\"a\":\"x\",\"hidden\":\"y\"}\n{\"a\":\"z\",\"hidden\":\"w\"}\n"
        );
    }

    #[test]
    fn table_truncates_and_keeps_columns_aligned_across_chunks() {
        let rows: Vec<Pair> = (0..TABLE_CHUNK + 3)
            .map(|i| {
                if i % 2 == 0 {
                    Pair("short", "")
                } else {
                    Pair("a much longer text", "")
                }
            })
            .collect();
        let text = printed(Format::Table, &rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            2 + rows.len(),
            "one header, one rule, one line per row"
        );
        assert!(lines[0].contains(" a "), "{}", lines[0]);
        assert!(!text.contains("hidden"));
        assert!(text.contains("a muc…"), "{text}");
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{text}");
    }

    struct Note(&'static str, &'static str);

    impl Record for Note {
        const COLUMNS: &'static [Column] = &[
            Column {
                name: "id",
                table_width: Some(4),
            },
            Column {
                name: "note",
                table_width: None,
            },
        ];
        fn json(&self) -> Value {
            serde_json::json!({"id": self.0, "note": self.1})
        }
        fn cells(&self) -> Vec<String> {
            vec![self.0.to_owned(), self.1.to_owned()]
        }
        fn block(&self) -> Option<Block> {
            Some(Block {
                name: "note",
                of: self.0.to_owned(),
                text: self.1.to_owned(),
            })
        }
    }

    #[test]
    fn table_prints_a_block_in_full_under_its_row() {
        let mut printer = Printer::<Vec<u8>, Note>::new(Format::Table, Vec::new());
        printer.print(&Note("a", "two\r\nlines, é\n")).unwrap();
        printer.print(&Note("b", "")).unwrap();
        printer.finish().unwrap();
        assert_eq!(
            String::from_utf8(printer.out).unwrap(),
            "| id   |\n|------|\n| a    |\n--- note of a, 15 bytes ---\ntwo\r\nlines, é\n\n--- end of note ---\n\
             | b    |\n--- note of b, 0 bytes ---\n\n--- end of note ---\n"
        );
    }

    /// Two columns in the table: 19 characters a line.
    struct KeyValue;

    impl Record for KeyValue {
        const COLUMNS: &'static [Column] = &[
            Column {
                name: "key",
                table_width: Some(6),
            },
            Column {
                name: "value",
                table_width: Some(6),
            },
        ];
        fn json(&self) -> Value {
            serde_json::json!({"key": "k", "value": "v"})
        }
        fn cells(&self) -> Vec<String> {
            vec!["k".to_owned(), "v".to_owned()]
        }
    }

    #[test]
    fn a_fitted_table_leaves_columns_out_until_its_lines_fit() {
        let mut wide = Printer::<Vec<u8>, KeyValue>::new(Format::Table, Vec::new());
        assert_eq!(wide.fit(19), Vec::<&str>::new());
        let mut printer = Printer::<Vec<u8>, KeyValue>::new(Format::Table, Vec::new());
        assert_eq!(printer.fit(18), vec!["value"]);
        printer.print(&KeyValue).unwrap();
        printer.finish().unwrap();
        let text = String::from_utf8(printer.out).unwrap();
        assert!(
            text.lines().all(|line| line.chars().count() <= 10),
            "{text}"
        );
        assert!(text.contains("key") && !text.contains("value"), "{text}");
        // The first column stays, however narrow.
        let mut narrow = Printer::<Vec<u8>, KeyValue>::new(Format::Table, Vec::new());
        assert_eq!(narrow.fit(3), vec!["value"]);
    }

    #[test]
    fn cells_are_fitted_to_their_width_on_one_line() {
        assert_eq!(fit("a\nb", 5), "a b  ");
        assert_eq!(fit("abcdef", 3), "ab…");
    }
}
