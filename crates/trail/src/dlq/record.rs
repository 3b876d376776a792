//! Owns a listed dead-letter message as a record of the output formats: its columns, with or
//! without its body. Must not know how messages are received or what a redrive does.

use serde_json::Value;

use super::message::{DlqMessage, OriginalSender};
use crate::output::{Block, Column, Record};

/// A listed message without its body (audit text can be personal data), with its original
/// sender as attested.
pub struct Listed<'a>(pub &'a DlqMessage, pub OriginalSender);
/// A listed message with its body (`--show-body`).
pub struct ListedWithBody<'a>(pub &'a DlqMessage, pub OriginalSender);

const fn column(name: &'static str, table_width: Option<usize>) -> Column {
    Column { name, table_width }
}

/// The columns of a listed message, with or without its body.
const LISTED: [Column; 8] = [
    column("messageId", Some(36)),
    column("reason", Some(29)),
    column("originalSqsMessageId", Some(36)),
    column("failedAt", Some(24)),
    column("receiveCount", Some(7)),
    column("bodyBytes", Some(9)),
    column("originalSenderId", Some(24)),
    // The dead-letter message's own sender: in jsonl and csv.
    column("senderId", None),
];

/// Those columns, then the body: not a cell in the table, a person who asks for the body sees
/// all of it, under the row.
const LISTED_WITH_BODY: [Column; 9] = {
    let [a, b, c, d, e, f, g, h] = LISTED;
    [a, b, c, d, e, f, g, h, column("body", None)]
};

impl Record for Listed<'_> {
    const COLUMNS: &'static [Column] = &LISTED;
    fn json(&self) -> Value {
        self.0.json(&self.1, false)
    }
    fn cells(&self) -> Vec<String> {
        self.0.cells(&self.1)
    }
}

impl Record for ListedWithBody<'_> {
    const COLUMNS: &'static [Column] = &LISTED_WITH_BODY;
    fn json(&self) -> Value {
        self.0.json(&self.1, true)
    }
    fn cells(&self) -> Vec<String> {
        let mut cells = self.0.cells(&self.1);
        cells.push(self.0.body.clone());
        cells
    }
    fn block(&self) -> Option<Block> {
        Some(Block {
            name: "body",
            of: self.0.message_id.clone(),
            text: self.0.body.clone(),
        })
    }
}
