"""A one-file container image as an OCI image layout archive, for ``ctr images import``.

Why: a real node started by the kubelet machine provider (berthmaster.operator.machines.
providers.kubelet) needs its sandbox image in its own containerd, and the host that runs the
operator may have no Docker daemon and no registry. containerd imports an OCI image layout
(image-spec ``image-layout.md``: ``oci-layout``, ``index.json``, ``blobs/sha256/``) directly;
this module writes one in memory. Pure: bytes in, bytes out, deterministic (every mtime 0), so
the same files give the same digests.

The image is one uncompressed layer (``application/vnd.oci.image.layer.v1.tar``), a config with
the entrypoint, and a manifest for linux/amd64; ``index.json`` names it with the annotations
containerd's importer reads (``io.containerd.image.name``, and the OCI
``org.opencontainers.image.ref.name``).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
PLATFORM = {"architecture": "amd64", "os": "linux"}


def _tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, 0
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _json(document: object) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(media_type: str, blob: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": f"sha256:{hashlib.sha256(blob).hexdigest()}",
            "size": len(blob)}


def one_file_archive(name: str, files: dict[str, tuple[bytes, int]],
                     entrypoint: list[str]) -> bytes:
    """The OCI layout tar of an image named ``name`` (``registry/repository:tag``) holding
    ``files`` (path -> (content, mode)) and running ``entrypoint``."""
    layer = _tar(files)
    layer_digest = _descriptor(LAYER, layer)["digest"]
    config = _json({**PLATFORM, "config": {"Entrypoint": entrypoint},
                    "rootfs": {"type": "layers", "diff_ids": [layer_digest]}})
    manifest = _json({"schemaVersion": 2, "mediaType": MANIFEST,
                      "config": _descriptor(CONFIG, config),
                      "layers": [_descriptor(LAYER, layer)]})
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = _json({"schemaVersion": 2, "mediaType": INDEX, "manifests": [{
        **_descriptor(MANIFEST, manifest), "platform": PLATFORM,
        "annotations": {"io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": tag}}]})
    blobs = {f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}": (blob, 0o644)
             for blob in (layer, config, manifest)}
    return _tar({"oci-layout": (_json({"imageLayoutVersion": "1.0.0"}), 0o644),
                 "index.json": (index, 0o644), **blobs})
