//! A TLS identity for local stand-ins, made at run time (rcgen): a CA and a server certificate
//! for 127.0.0.1 and localhost. Clients trust the CA's PEM (`SSL_CERT_FILE` for the function).
//! Used by the TLS tests and by the benchmarks (`benches/load.rs`).

use std::sync::Arc;

/// The CA's PEM, and an acceptor serving the certificate it signed.
pub fn acceptor() -> (String, tokio_rustls::TlsAcceptor) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "audit-receiver local CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![server.der().clone(), ca.der().clone()],
            tokio_rustls::rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca.pem(), tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
