"""Listing: what the store holds, by one of three kinds: the whole namespace (full), only what may have changed
since the previous run (incremental), or an inventory report written by the store (``inventory``, S3;
``inventory_azure``, Azure; the driver reads its manifest, each data file is a unit the backend reads into Arrow
columns: ``inventory_columns``)."""
