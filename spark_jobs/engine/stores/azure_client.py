"""adlfs's filesystem with the GC's client settings: imported only when a namespace is on Azure (it imports adlfs).

adlfs builds its BlobServiceClient with azure-storage-blob's defaults: an ExponentialRetry of 3 retries 15 s, then
15 + 3^n s apart, for throttling answers, time-outs and refused connections alike, and per-request time-outs only
on uploads and downloads. A store gone then took 418 s to surface on Azurite, and the GC's throttle never saw a
503 ServerBusy. Here the client makes one attempt per request, with ``connection_timeout`` / ``read_timeout`` on
every request (listings and batches included): ``throttle.Throttle`` does the retrying, as it does for S3."""

from __future__ import annotations

from adlfs import AzureBlobFileSystem as _AdlfsFileSystem
from azure.storage.blob.aio import BlobServiceClient


class AzureBlobFileSystem(_AdlfsFileSystem):
    def __init__(self, *args, connection_timeout: float | None = None, read_timeout: float | None = None,
                 **kwargs) -> None:
        # read by do_connect, which adlfs calls from its __init__
        self.request_timeouts = {k: v for k, v in (("connection_timeout", connection_timeout),
                                                   ("read_timeout", read_timeout)) if v is not None}
        super().__init__(*args, connection_timeout=connection_timeout, read_timeout=read_timeout, **kwargs)

    def do_connect(self) -> None:
        super().do_connect()
        built = self.service_client
        # the same account, endpoint and credential as adlfs chose (the URL carries a SAS token when there is one)
        self.service_client = BlobServiceClient(
            built.url, credential=built.credential, secondary_hostname=built.secondary_hostname, retry_total=0,
            **getattr(self, "request_timeouts", {}))
