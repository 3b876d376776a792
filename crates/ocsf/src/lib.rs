//! Every archived event as an OCSF 1.3 record, and those records as zstd Parquet objects under
//! Security Lake's key layout (docs/ocsf.md). Pure: no AWS SDK, no async runtime, no I/O but the
//! writer's `std::io::Write`.

pub mod columns;
pub mod envelope;
pub mod layout;
pub mod record;
pub mod verb;

pub use columns::{WriteError, write};
pub use layout::object_key;
pub use record::{MapError, OCSF_VERSION, Place, Record, record, streamed};
pub use verb::{Activity, Class};
