"""The SSTable reader against a live lakeFS: every range of HEAD's metarange, read from the storage namespace and
through the metadata-object endpoint, lists exactly what lakeFS's own object listing returns."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import lakefs_sdk
import pytest
import requests

from spark_jobs.core import range_arrow, sstable
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer


@pytest.fixture
def api(lakefs_server: LakeFSServer):
    session = requests.Session()
    session.auth = (ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    base = f"{lakefs_server.endpoint}/api/v1"

    def call(method: str, path: str, expect: int = 200, **kwargs) -> requests.Response:
        resp = session.request(method, base + path, timeout=60, **kwargs)
        assert resp.status_code == expect, f"{method} {path}: {resp.status_code} {resp.text}"
        return resp

    yield call
    session.close()


def listing(api, repo: str, ref: str) -> list[dict]:
    out, after = [], ""
    while True:
        page = api("GET", f"/repositories/{repo}/refs/{ref}/objects/ls",
                   params={"user_metadata": "true", "amount": 1000, "after": after}).json()
        out.extend(page["results"])
        if not page["pagination"]["has_more"]:
            return out
        after = page["pagination"]["next_offset"]


def build_history(api, server: LakeFSServer, repo: str) -> list[str]:
    """Three commits on main: uploads of varied sizes and metadata, full-address objects, overwrites, deletes."""
    rnd = random.Random(7)

    def upload(i: int) -> None:
        headers = {"X-Lakefs-Meta-Batch": str(i % 5)} if i % 3 == 0 else {}
        api("POST", f"/repositories/{repo}/branches/main/objects", 201, params={"path": f"p{i % 7}/obj-{i:04d}"},
            files={"content": ("b", rnd.randbytes(i % 3000), "application/octet-stream")}, headers=headers)

    commits = []
    for round_ in range(3):
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(upload, range(round_ * 60, round_ * 60 + 240)))  # overlapping: overwrites
        (server.import_dir / f"ext-{round_}.bin").write_bytes(b"e" * (round_ + 1))
        api("PUT", f"/repositories/{repo}/branches/main/objects", 201, params={"path": f"ext/{round_}.bin"},
            json={"physical_address": f"local://{server.import_dir}/ext-{round_}.bin", "checksum": f"c{round_}",
                  "size_bytes": round_ + 1, "metadata": {"origin": "stage"}})
        for i in range(round_, 240, 17):
            api("DELETE", f"/repositories/{repo}/branches/main/objects", 204, params={"path": f"p{i % 7}/obj-{i:04d}"})
        commits.append(api("POST", f"/repositories/{repo}/branches/main/commits", 201,
                           json={"message": f"round {round_}"}).json()["id"])
    return commits


def test_every_range_of_each_commit_matches_the_listing(api, lakefs_server: LakeFSServer, repo: str) -> None:
    commits = build_history(api, lakefs_server, repo)
    namespace = lakefs_server.dir / "block" / repo  # storage namespace local://<repo>
    block_root = str(lakefs_server.dir / "block")
    for commit_id in commits:
        mr_id = api("GET", f"/repositories/{repo}/commits/{commit_id}").json()["meta_range_id"]
        location = api("GET", f"/repositories/{repo}/metadata/meta_range/{mr_id}").json()["location"]
        metarange = (namespace / location).read_bytes()
        assert metarange == api("GET", f"/repositories/{repo}/metadata/object/meta_range/{mr_id}").content
        assert sstable.content_id(metarange) == mr_id

        entries = []
        for rid in sstable.metarange_range_ids(metarange):
            location = api("GET", f"/repositories/{repo}/metadata/range/{rid}").json()["location"]
            assert location == f"_lakefs/{rid}"
            data = (namespace / location).read_bytes()
            assert data == api("GET", f"/repositories/{repo}/metadata/object/range/{rid}").content
            assert sstable.content_id(data) == rid
            got = list(sstable.iter_entries(data))
            assert sstable.range_addresses(data) == [(e.address, e.address_type) for e in got]
            assert sstable.range_entries(data) == [(e.path, e.address, e.address_type, e.size) for e in got]
            assert range_arrow.range_batch(data).equals(range_arrow.careful_batch(data))  # the compiled walk
            entries.extend(got)

        listed = listing(api, repo, commit_id)
        assert [e.path.decode() for e in entries] == [o["path"] for o in listed]
        for entry, obj in zip(entries, listed, strict=True):
            if entry.address_type == sstable.ADDRESS_TYPE_RELATIVE:
                assert obj["physical_address"] == f"local://{namespace}/{entry.address}"
            else:  # full: the API shows it under the blockstore root (lakefs-facts.md §8)
                assert entry.address_type == sstable.ADDRESS_TYPE_FULL
                assert obj["physical_address"] == f"local://{block_root}{entry.address.removeprefix('local://')}"
            assert (entry.size, entry.e_tag, entry.last_modified) == (obj["size_bytes"], obj["checksum"], obj["mtime"])
            assert entry.metadata == (obj.get("metadata") or {})
        assert {e.address_type for e in entries} == {1, 2}


def test_versions_of_a_range_share_their_blocks_and_each_is_decoded_once(api, lakefs, repo) -> None:
    """600 objects (a range of many 4 KiB blocks), then one overwrite: the new range version differs from the old
    in the blocks around that entry only. With a shared seen-block set the second version decodes only those
    blocks, and the union of addresses is exactly that of reading both in full."""
    for i in range(600):
        lakefs.upload(repo, "main", f"t/obj-{i:04d}", data=b"x" * 10)
    first = lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="600")).id
    lakefs.upload(repo, "main", "t/obj-0300", data=b"y" * 10)
    second = lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="one overwrite")).id

    def range_bytes(commit_id: str) -> bytes:
        mr_id = api("GET", f"/repositories/{repo}/commits/{commit_id}").json()["meta_range_id"]
        metarange = api("GET", f"/repositories/{repo}/metadata/object/meta_range/{mr_id}").content
        (rid,) = sstable.metarange_range_ids(metarange)
        return api("GET", f"/repositories/{repo}/metadata/object/range/{rid}").content

    old, new = range_bytes(first), range_bytes(second)
    assert old != new and len(sstable.range_addresses(old)) == 600
    seen: set[bytes] = set()
    from_old = sstable.range_addresses(old, seen_blocks=seen)
    blocks = len(seen)
    from_new = sstable.range_addresses(new, seen_blocks=seen)
    assert blocks >= 10 and len(from_old) == 600
    assert 1 <= len(seen) - blocks <= 2 and len(from_new) < 600 / blocks * 2 + 1  # the changed block(s) only
    assert set(from_old) | set(from_new) == set(sstable.range_addresses(old)) | set(sstable.range_addresses(new))
    assert sstable.range_addresses(new, seen_blocks=seen) == []  # everything seen: nothing decoded again
