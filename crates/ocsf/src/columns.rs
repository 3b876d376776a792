//! Owns the Parquet form of a class's records (docs/ocsf.md "Parquet"): the columns, one per
//! top-level OCSF attribute, objects as their JSON text; one class per object, rows in time
//! order, zstd. Must not know where an object goes (`layout`) or how a record is mapped.

use std::sync::Arc;

use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

use crate::record::Record;
use crate::verb::Class;

/// How a column holds its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer (`*_id`, `*_uid`, `time` in epoch milliseconds), INT64.
    Integer,
    /// A string, BYTE_ARRAY (STRING).
    Text,
    /// An object or array as its JSON text, BYTE_ARRAY (STRING): nesting these as Parquet
    /// groups would need a schema per OCSF object (open-ended: `unmapped`, `user`), and every
    /// reader (DuckDB's `json`, Athena's `json_extract`) reads the text.
    Json,
}

/// The columns, in order: every top-level attribute a record of either class can have.
pub const COLUMNS: [(&str, Kind); 26] = [
    ("time", Kind::Integer),
    ("class_uid", Kind::Integer),
    ("class_name", Kind::Text),
    ("category_uid", Kind::Integer),
    ("category_name", Kind::Text),
    ("activity_id", Kind::Integer),
    ("activity_name", Kind::Text),
    ("type_uid", Kind::Integer),
    ("type_name", Kind::Text),
    ("severity_id", Kind::Integer),
    ("severity", Kind::Text),
    ("status_id", Kind::Integer),
    ("status", Kind::Text),
    ("status_code", Kind::Text),
    ("status_detail", Kind::Text),
    ("message", Kind::Text),
    ("metadata", Kind::Json),
    ("cloud", Kind::Json),
    ("actor", Kind::Json),
    ("user", Kind::Json),
    ("service", Kind::Json),
    ("api", Kind::Json),
    ("src_endpoint", Kind::Json),
    ("http_request", Kind::Json),
    ("resources", Kind::Json),
    ("unmapped", Kind::Json),
];

/// Why records were not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("an object holds one class: {0} and {1} were given")]
    MixedClasses(&'static str, &'static str),
    #[error("record attribute {0} does not fit its column")]
    BadAttribute(&'static str),
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}

/// The Parquet schema of the records.
pub fn message_type() -> String {
    let fields: String = COLUMNS
        .iter()
        .map(|(name, kind)| match kind {
            Kind::Integer => format!("  OPTIONAL INT64 {name};\n"),
            Kind::Text | Kind::Json => format!("  OPTIONAL BYTE_ARRAY {name} (STRING);\n"),
        })
        .collect();
    format!("message ocsf {{\n{fields}}}")
}

/// Writes records of one class, in time order (ties in the order given), as one zstd Parquet
/// object with one row group; gives back the class (`None`: no records, nothing written).
pub fn write<W: std::io::Write + Send>(
    records: &mut [Record],
    out: W,
) -> Result<Option<Class>, WriteError> {
    let Some(class) = records.first().map(|r| r.class) else {
        return Ok(None);
    };
    if let Some(other) = records.iter().find(|r| r.class != class) {
        return Err(WriteError::MixedClasses(class.name(), other.class.name()));
    }
    records.sort_by_key(|r| r.time);
    let schema = Arc::new(parse_message_type(&message_type())?);
    let properties = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .build(),
    );
    let mut writer = SerializedFileWriter::new(out, schema, properties)?;
    let mut group = writer.next_row_group()?;
    for (name, kind) in COLUMNS {
        let Some(mut column) = group.next_column()? else {
            // The schema is COLUMNS: one column each.
            break;
        };
        let values = records.iter().map(|r| r.fields.get(name));
        let levels: Vec<i16> = values
            .clone()
            .map(|v| i16::from(v.is_some_and(|v| !v.is_null())))
            .collect();
        let present = values.flatten().filter(|v| !v.is_null());
        match kind {
            Kind::Integer => {
                let numbers = present
                    .map(|v| v.as_i64().ok_or(WriteError::BadAttribute(name)))
                    .collect::<Result<Vec<i64>, _>>()?;
                column
                    .typed::<Int64Type>()
                    .write_batch(&numbers, Some(&levels), None)?;
            }
            Kind::Text | Kind::Json => {
                let texts = present
                    .map(|v| match (kind, v) {
                        (Kind::Text, Value::String(text)) => Ok(ByteArray::from(text.as_str())),
                        (Kind::Json, v) => Ok(ByteArray::from(v.to_string().into_bytes())),
                        _ => Err(WriteError::BadAttribute(name)),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                column
                    .typed::<ByteArrayType>()
                    .write_batch(&texts, Some(&levels), None)?;
            }
        }
        column.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(Some(class))
}
