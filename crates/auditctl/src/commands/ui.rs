//! Owns `auditctl ui`: its flags and help, the loopback listener, the printed URL, and stopping
//! on Ctrl-C. Must not know the pages or how the trail is read (`audit_viewer`).

use std::sync::Arc;

use crate::commands::words::TrailError;
use crate::commands::words::viewer_words;
use audit_aws::config::ClientOptions;
use audit_aws::s3::Bucket;
use audit_proof::archive::S3Archive;
use audit_proof::tlog::witness_key_args;
use audit_proof::verify::kms::KmsKey;
use audit_trail::access::AccessLog;
use audit_trail::dlq::DeadLetterQueue;
use audit_viewer::archive::{Archive, key_fetch};
use audit_viewer::session::Session;
use audit_viewer::{DeadLetters, Viewer, listen, serve};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use super::archive_flags::ArchiveFlags;
use super::{Context, Failure, TableArgs};

/// A web page over the trail on 127.0.0.1: search by time and by actor, action, resource,
/// outcome, source IP or sender (the same queries as auditctl query), an event's every field,
/// and exports as CSV or JSON lines; with your own AWS credentials.
#[derive(Debug, Args)]
#[command(after_help = "\
It listens on 127.0.0.1 only (a random free port unless --port) and prints a URL with the run's
secret as its path and a one-time token: the first load moves the token to a cookie of that
browser and drops it from the address. A request without the secret in its path (404), or without
the token or the cookie (401/403), is refused; verify, bodies and redrive are POSTs from the
viewer's own page (another or no Origin: 403). The link works once: for another browser or tab
after a restart, press Enter (a line on stdin) and it prints a fresh link, a new one-time token in
place of the last (which stops working); browsers already in keep their session. Ctrl-C stops it.

Every search (and each further page of it), event view, dead-letter listing, export, redrive and
verify first sends its access event (auditctl.ui.search, auditctl.ui.view, auditctl.ui.export,
auditctl.ui.redrive, auditctl.ui.verify) to the access queue, as every command does; if it cannot
be sent the page shows why and no data. With no access queue (and no --no-audit-event) it does
not start: exit 2, nothing read.

With DEAD_LETTER_QUEUE_URL, a page lists the dead-letter queue by reason (bodies only on request);
with AUDIT_QUEUE_URL too, each reason can be redriven after a confirmation that states how many
messages will move (the operator's permissions: AuditOperatorPolicy).

With ARCHIVE_BUCKET, a health page names the newest sealed period and its age, the tamper records,
and the transparency log's newest checkpoint with the witnesses' cosignatures; each event's page
says whether its period has its digest. With DIGEST_KEY_ID too, the health page runs verify over
the periods in view on request (at most 31 days; auditctl.ui.verify is recorded first) and checks
the log's signature on the newest checkpoint. A cosignature counts, on the health page and an
event's proof, only when it verifies under a --witness-key; any other is labelled unverified.

Examples:
  auditctl ui
  auditctl ui --port 8700
  auditctl ui --witness-key witness.pub

Environment: TABLE_NAME, ACCESS_QUEUE_URL, DEAD_LETTER_QUEUE_URL, AUDIT_QUEUE_URL, ARCHIVE_BUCKET,
DIGEST_KEY_ID, DIGEST_PERIOD_SECONDS, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.")]
pub struct UiArgs {
    /// The port on 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
    /// The dead-letter queue (stack output AuditDeadLetterQueueUrl): its page lists it by reason.
    #[arg(long, env = "DEAD_LETTER_QUEUE_URL")]
    dlq_url: Option<String>,
    /// The audit queue a redrive sends messages back to (stack output AuditQueueUrl).
    #[arg(long, env = "AUDIT_QUEUE_URL")]
    queue_url: Option<String>,
    /// The archive (the health page and each event's period seal, from its digests) and the
    /// digest key (the health page verifies the periods in view with its public key, and checks
    /// the log's signature on the newest checkpoint).
    #[command(flatten)]
    archive: ArchiveFlags,
    /// A witness whose cosignatures the pages count and show as verified: its key
    /// (<name>+<key id>+<base64 key>, as `auditctl witness --init` prints it) or a file holding
    /// it. Repeatable. A cosignature that verifies under none is labelled unverified.
    #[arg(long, value_name = "KEY")]
    witness_key: Vec<String>,
    #[command(flatten)]
    table: TableArgs,
}

/// `auditctl ui`: listen, print the URL, serve until Ctrl-C.
pub async fn run(args: UiArgs, context: Context) -> Result<(), Failure> {
    // No access queue: refused before it listens, as every command that reads is.
    context.access.ready()?;
    let witnesses = witness_key_args(&args.witness_key).map_err(Failure::usage)?;
    // The receiver's attestation key, when given: fetched once; each event's items checked.
    let attestations = args.archive.attestation.fetch(&context).await?;
    let (listener, bound) = listen(args.port).await.map_err(TrailError::from)?;
    let session =
        Session::new(bound).map_err(|e| TrailError::from(audit_viewer::Error::from(e)))?;
    let table = args.table.table;
    let reader = context.reader(&table);
    let mut viewer = Viewer::new(
        reader,
        table,
        context.location.clone(),
        context.access,
        session,
    )
    .with_words(viewer_words);
    if let Some(attestations) = attestations {
        viewer = viewer.with_attestations(attestations);
    }
    if let Some(url) = args.dlq_url {
        let client = audit_aws::config::sqs(&context.config, ClientOptions::AS_CONFIGURED);
        viewer = viewer.with_dead_letters(DeadLetters {
            queue: DeadLetterQueue::new(client, url.clone()),
            url,
            target: args.queue_url,
        });
    }
    if let Some(name) = args.archive.log.bucket.given() {
        // The digest key's public key from KMS (never from next to a digest), fetched at each use.
        let key = args.archive.log.given_key_id().map(|key_id| {
            key_fetch(KmsKey::new(
                &context.config,
                key_id,
                context.location.clone(),
            ))
        });
        viewer = viewer.with_archive(Archive {
            bucket: S3Archive::new(&context.config, &name, context.location.clone()),
            name,
            length: args.archive.period,
            key,
            witnesses,
        });
    }
    let viewer = Arc::new(viewer);
    // Watched before the URL is printed, so that a Ctrl-C at any time after it stops the server.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    println!("auditctl ui: open {}", viewer.url());
    println!("(listening on {bound} only; Enter prints a fresh link; Ctrl-C stops it)");
    fresh_links(viewer.clone());
    serve(listener, viewer, async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
    .await;
    println!("auditctl ui: stopped");
    Ok(())
}

/// A fresh link for each line on stdin (Enter), on a thread of its own: a blocking read of stdin
/// cannot be cancelled, and a plain thread does not hold up the exit. At the end of stdin (none,
/// or a pipe closed) it stops, and the server runs on.
fn fresh_links<L: AccessLog + 'static, B: Bucket + 'static>(viewer: Arc<Viewer<L, B>>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            if line.is_err() {
                return;
            }
            match viewer.fresh_url() {
                Ok(url) => {
                    println!("auditctl ui: open {url} (a fresh link; the last one no longer opens)")
                }
                Err(error) => eprintln!("auditctl ui: {error}"),
            }
        }
    });
}
