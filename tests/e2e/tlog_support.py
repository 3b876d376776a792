"""A transparency log written as the sealer writes it, for the witness's tests: RFC 9162 leaves
and roots, one C2SP partial tile per tree size (trees under 256 leaves: one tile), checkpoints
signed by the stack's AuditDigestKey (KMS Sign, RAW, ECDSA_SHA_256 over the note's text, key ID =
the first four bytes of SHA-256 of the DER public key). `checkpoint` also signs a root of one's
choosing: a fork."""

from __future__ import annotations

import base64
import hashlib


def leaf(line: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + line).digest()


def root(hashes: list[bytes]) -> bytes:
    """RFC 9162 MTH."""
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + root(hashes[:k]) + root(hashes[k:])).digest()


def leaves(n: int, tag: str = "w") -> list[bytes]:
    return [leaf(f'{{"messageId":"{tag}-{i}"}}'.encode()) for i in range(n)]


def checkpoint(kms, key_arn: str, bucket: str, size: int, root_hash: bytes, extension: str = "") -> str:
    """The signed note of (size, root) under the bucket's origin (with `extension`, lines after
    the root, when given)."""
    origin = f"audit-receiver/{bucket}"
    key_id = hashlib.sha256(kms.get_public_key(KeyId=key_arn)["PublicKey"]).digest()[:4]
    body = f"{origin}\n{size}\n{base64.b64encode(root_hash).decode()}\n{extension}"
    signature = kms.sign(KeyId=key_arn, Message=body.encode(), MessageType="RAW",
                         SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    return f"{body}\n\u2014 {origin} {base64.b64encode(key_id + signature).decode()}\n"


def write_log(s3, kms, key_arn: str, bucket: str, sizes: list[int], tag: str = "w") -> None:
    """The tile and the checkpoint of each tree size (each under 256), as the sealer writes them.
    The caller lets these writes through the bucket policy (they are the archiver's)."""
    hashes = leaves(max(sizes), tag)
    for n in sizes:
        s3.put_object(Bucket=bucket, Key=f"log/tile/0/000.p/{n}", Body=b"".join(hashes[:n]),
                      ChecksumAlgorithm="SHA256")
        s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{n:020}",
                      Body=checkpoint(kms, key_arn, bucket, n, root(hashes[:n])).encode(), ChecksumAlgorithm="SHA256")
