"""Conditional range requests to Google Cloud Storage (``gs://``, gcsfs) and Azure Blob Storage (``az://``,
adlfs): the backend halves of :class:`~consumer.sources.requests.RangeRequests`.

Each function sends one ranged download that the server itself refuses when the object is no longer the
indexed version, and returns the body with the version facts of the answer, which the caller checks:

- **GCS**: ``GET .../o/<object>?alt=media`` with ``Range`` and ``ifGenerationMatch=<generation>`` (the catalog
  keeps a GCS object's *generation*, which changes exactly when its content is replaced; metadata updates do
  not change it). Google answers 412 for another generation and reports ``x-goog-generation`` and
  ``Content-Range``. A server that does not report the generation (an emulator) is reported as such
  (``None``), and the caller checks the object's metadata instead.
- **Azure**: ``download_blob(offset, length, etag=..., match_condition=IfNotModified)``, i.e. ``If-Match``;
  the answer's ETag and ``Content-Range`` come back.

Neither goes through the file system's own retry loop: the caller retries with its own policy.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["get_gcs", "get_azure", "gcs_class"]


def gcs_class(cls: type, options: Mapping[str, Any]) -> type:
    """The gcsfs file-system class to use: its plain JSON-API ``GCSFileSystem`` when ``options`` name a custom
    endpoint (``endpoint_url``, or ``STORAGE_EMULATOR_HOST`` is set), else ``cls``. gcsfs's default class
    first asks Google's gRPC control API for each bucket's type, which an emulator does not serve: every
    call would wait 60 s for it."""
    if options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST"):
        plain: type = importlib.import_module("gcsfs.core").GCSFileSystem
        return plain
    return cls


async def get_gcs(fs: Any, url: str, start: int, length: int, generation: str | None
                  ) -> tuple[bytes, str | None, str | None]:
    """``(body, generation reported or None, Content-Range)`` of bytes ``start .. start+length`` of ``url``
    through the gcsfs file system ``fs``; ``generation`` (digits) makes the request conditional."""
    await fs._set_session()
    headers = fs._get_headers({"Range": f"bytes={start}-{start + length - 1}", "Accept-Encoding": "identity"})
    params = {"ifGenerationMatch": generation} if generation and generation.isdigit() else {}
    async with fs.session.get(fs.url(url), headers=headers, params=params, timeout=fs.requests_timeout) as r:
        if r.status >= 400:
            r.raise_for_status()
        data = await r.read()
        return data, r.headers.get("x-goog-generation"), r.headers.get("Content-Range")


async def get_azure(fs: Any, url: str, start: int, length: int, etag: str | None
                    ) -> tuple[bytes, str | None, str | None]:
    """``(body, ETag, Content-Range)`` of bytes ``start .. start+length`` of ``url`` through the adlfs file
    system ``fs``; ``etag`` (unquoted) makes the request conditional (``If-Match``)."""
    from azure.core import MatchConditions  # noqa: PLC0415  (present whenever adlfs is)

    container, blob, version_id = fs.split_path(fs._strip_protocol(url))
    kw: dict[str, Any] = {"etag": f'"{etag}"', "match_condition": MatchConditions.IfNotModified} if etag else {}
    async with fs.service_client.get_blob_client(container=container, blob=blob) as client:
        stream = await client.download_blob(offset=start, length=length, version_id=version_id, max_concurrency=1,
                                            **kw, **fs._timeout_kwargs)
        data = await stream.readall()
        return data, stream.properties.etag, stream.properties.content_range
