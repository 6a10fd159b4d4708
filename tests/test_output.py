"""Output through htslib: SAM, BGZF SAM, BAM and CRAM streamed; --sort with its index; a failed run
leaves nothing behind."""
import gzip
import os

import pysam
import pytest

from pymap import api, cli
from pymap.options import AlignOptions
from pymap.sam import BAI_MAX_LEN, index_suffix

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(ROOT, "examples", "lambda.fa")
READS = os.path.join(ROOT, "examples", "reads.fq.gz")


def _align(out, ref=REF, **kw):
    kw.setdefault("progress", False)
    return api.align(ref, READS, out=str(out), options=AlignOptions(**kw), summary=False)


def _records(path, ref=REF):
    """(header dict, records as text with their tags sorted: CRAM rebuilds MD and NM at the end)."""
    def text(r):
        fields = r.to_string().split("\t")
        return "\t".join(fields[:11] + sorted(fields[11:]))
    with pysam.AlignmentFile(str(path), reference_filename=ref) as f:
        return f.header.to_dict(), [text(r) for r in f]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain") / "out.sam"
    _align(out)
    return _records(out)


@pytest.fixture(params=["pysam", "system"])
def samtools_kind(request, monkeypatch):
    """Output through pysam's samtools, then through the one on PATH (when it is recent enough)."""
    from pymap import sam
    if request.param == "pysam":
        monkeypatch.setattr(sam, "system_samtools", lambda: None)
    elif sam.system_samtools() is None:
        pytest.skip("no samtools >= 1.10 on PATH")
    return request.param


@pytest.mark.parametrize("version,used", [("samtools 0.1.19", False), ("samtools 1.9", False),
                                          ("samtools 1.10", True), ("samtools 1.21", True)])
def test_samtools_on_path_is_used_from_1_10(tmp_path, monkeypatch, version, used):
    from pymap import sam
    exe = tmp_path / "samtools"
    exe.write_text(f"#!/bin/sh\necho '{version}'\necho 'Using htslib x'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    sam.system_samtools.cache_clear()
    try:
        assert sam.system_samtools() == (str(exe) if used else None)
    finally:
        sam.system_samtools.cache_clear()


@pytest.mark.parametrize("name", ["out.bam", "out.cram", "out.sam.gz"])
def test_formats_hold_the_same_records_and_header(plain, tmp_path, name, samtools_kind):
    _align(tmp_path / name)
    header, recs = _records(tmp_path / name)
    assert recs == plain[1]
    assert [pg["ID"] for pg in header["PG"]] == ["pymap"]      # htslib adds no @PG of its own
    assert header["HD"]["SO"] == "unsorted"
    assert not any(n.endswith(".part") for n in os.listdir(tmp_path))


def test_sam_gz_is_bgzf(tmp_path):
    out = tmp_path / "out.sam.gz"
    _align(out)
    with open(out, "rb") as fh:
        head = fh.read(18)
    assert head[:2] == b"\x1f\x8b" and head[12:14] == b"BC"       # BGZF's extra field
    assert gzip.open(out, "rt").readline().startswith("@HD")


@pytest.mark.parametrize("name,index", [("s.bam", ".bai"), ("s.cram", ".crai"), ("s.sam.gz", ".csi")])
def test_sort_writes_sorted_indexed_output_equal_to_samtools_sort(plain, tmp_path, name, index, samtools_kind):
    out = tmp_path / name
    _align(out, sort=True)
    idx = (tmp_path / (name + index)).read_bytes()        # written by htslib along with the file
    if index == ".bai":
        assert idx[:4] == b"BAI\x01"
    elif index == ".csi":
        assert gzip.decompress(idx)[:4] == b"CSI\x01"
    else:
        assert gzip.decompress(idx).count(b"\n") > 0      # CRAI: gzipped text, a line per slice
    header, recs = _records(out)
    assert header["HD"]["SO"] == "coordinate"
    # the same order as htslib's own sort of the unsorted output
    _align(tmp_path / "u.sam")
    pysam.sort("-o", str(tmp_path / "ref.bam"), str(tmp_path / "u.sam"))
    assert recs == _records(tmp_path / "ref.bam")[1]
    assert sorted(recs) == sorted(plain[1])
    contig = header["SQ"][0]["SN"]                                            # the index works
    n = int(pysam.view("-c", "-T", REF, str(out), f"{{{contig}}}:10001-12000"))
    assert 0 < n < len(recs)
    assert sorted(os.listdir(tmp_path)) == sorted([name, name + index, "u.sam", "ref.bam"])


def test_sort_to_stdout_is_sorted_sam(tmp_path, capfd):
    rc = cli.main(["align", REF, READS, "--sort", "--no-progress"])
    out = capfd.readouterr().out
    assert rc == 0
    lines = [l.split("\t") for l in out.splitlines() if not l.startswith("@")]
    assert out.startswith("@HD\tVN:1.6\tSO:coordinate") and len(lines) == 2000
    pos = [int(f[3]) for f in lines]
    assert pos == sorted(pos)


def test_cram_from_a_gzip_reference(tmp_path, capsys):
    import shutil
    ref = tmp_path / "ref.fa.gz"
    with open(REF, "rb") as src, gzip.open(ref, "wb") as dst:       # plain gzip: htslib cannot index it
        shutil.copyfileobj(src, dst)
    _align(tmp_path / "o.cram", ref=str(ref), sort=True)
    _, recs = _records(tmp_path / "o.cram")
    assert len(recs) == 2000
    # the UR htslib writes names the temporary copy it encoded against: said once
    assert capsys.readouterr().err.count("the CRAM's @SQ UR names a temporary copy") == 1


def test_index_kind_follows_contig_length():
    assert index_suffix("bam", BAI_MAX_LEN) == ".bai"
    assert index_suffix("bam", BAI_MAX_LEN + 1) == ".csi"
    assert index_suffix("cram", 10 ** 10) == ".crai"
    assert index_suffix("sam", 100) is None


@pytest.mark.parametrize("args", [["-o", "out.bam", "--sort"], ["-o", "out.cram"], ["-o", "out.sam.gz", "--sort"]])
def test_failed_run_leaves_nothing(tmp_path, capsys, args):
    reads = tmp_path / "r.fq"
    seq = "".join(open(REF).read().split("\n")[1:])
    reads.write_text("".join(f"@r{i}\n{seq[100 * i:100 * i + 100]}\n+\n{'I' * 100}\n" for i in range(50))
                     + "@bad\nACGT\n+\nII\n")
    args = [a if not a.startswith("out") else str(tmp_path / a) for a in args]
    rc = cli.main(["align", REF, str(reads), "--batch-size", "10", "--no-progress", *args])
    assert rc == 1 and "sequence and quality lengths differ" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["r.fq"]


def test_bad_level_and_extension_are_usage_errors(tmp_path, capsys):
    assert cli.main(["align", REF, READS, "-o", str(tmp_path / "x.bam"), "--level", "12"]) == 2
    assert "--level" in capsys.readouterr().err
    assert cli.main(["align", REF, READS, "-o", str(tmp_path / "x.bed")]) == 2
    assert "unknown output format" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args", [[], ["--sort"]])
def test_a_device_is_written_into_not_replaced(args, capsys):
    import stat
    assert cli.main(["align", REF, READS, "-o", os.devnull, "--no-progress", *args]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert not [n for n in os.listdir(os.path.dirname(os.devnull)) if n.startswith(".null")]


def test_a_fifo_receives_the_sam(tmp_path):
    import threading
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    _align(fifo)
    reader.join(timeout=60)
    assert got and got[0].count(b"\n") == 2000 + 3 and fifo.exists() and not fifo.is_file()


@pytest.mark.parametrize("ext", ["sam", "bam"])
def test_an_earlier_output_is_replaced_whole(tmp_path, ext):
    """An output file of the same name, or a link of that name, is replaced by the finished file
    (outfile.publish moves it aside first): its content gone, a link's target untouched, nothing left
    beside it."""
    out = tmp_path / f"out.{ext}"
    out.write_bytes(b"old output\n" * 1000)
    _align(out)
    _, records = _records(out)
    assert len(records) == 2000 and os.listdir(tmp_path) == [f"out.{ext}"]
    target = tmp_path / "kept.txt"
    target.write_bytes(b"not pymap's")
    out.unlink()
    out.symlink_to(target)
    _align(out)
    assert not out.is_symlink() and len(_records(out)[1]) == 2000 and target.read_bytes() == b"not pymap's"
    assert sorted(os.listdir(tmp_path)) == ["kept.txt", f"out.{ext}"]


def test_writer_stopped_while_starting_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while the writer starts htslib (its temporary output, index and sort files
    made already): they are removed."""
    from pymap import sam

    def stopped(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(sam, "samtools", stopped)
    header = pysam.AlignmentHeader.from_dict({"HD": {"VN": "1.6"}, "SQ": [{"SN": "c", "LN": 100}]})
    for name, sort in (("x.bam", True), ("y.bam", False)):
        with pytest.raises(KeyboardInterrupt):
            sam.SamWriter(str(tmp_path / name), header, sort=sort)
    assert os.listdir(tmp_path) == []
