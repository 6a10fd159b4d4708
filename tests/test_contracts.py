"""The pipeline's stage-contract checks (pipeline.check_candidates / check_alignments, kernels.contracts):
valid answers pass, each broken rule gives its own message, and the first rule in the contract's order
wins when several are broken."""
import copy

import numpy as np
import pytest

from pymap.batch import Alignments, CandidateBatch, Candidates, ReadBatch
from pymap.errors import PluginContractError
from pymap.extenders.affine import AffineExtender
from pymap.extenders.banded import BandedExtender
from pymap.pipeline import check_alignments, check_candidates

CONTIG = 2000


class Named:
    def __init__(self, name="x", scoring="score"):
        self.name, self.scoring = name, scoring


def _batch(seed=3, n=40):
    """n reads of 100 bp from a random 2-contig reference (one in four with two mismatches), each with
    its true candidate and a decoy candidate elsewhere."""
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 4, 2 * CONTIG).astype(np.uint8)
    starts = rng.integers(50, CONTIG - 200, n)
    reads = []
    for k, s in enumerate(starts):
        r = ref[s:s + 100].copy()
        if k % 4 == 0:
            r[[20, 70]] = (r[[20, 70]] + 1) % 4
        reads.append(r)
    offsets = np.arange(n + 1, dtype=np.int64) * 100
    batch = ReadBatch(np.concatenate(reads), offsets, np.zeros(0, np.uint8), np.zeros(n + 1, np.int64),
                      np.zeros(0, np.uint8)).with_rc()
    read = np.repeat(np.arange(n, dtype=np.int32), 2)
    pos = np.stack([starts, starts + 500]).T.reshape(-1).astype(np.int64)
    order = np.lexsort((pos, read))
    return CandidateBatch(batch, ref, read[order], np.zeros(2 * n, np.int8), pos[order],
                          np.zeros(2 * n, np.int64), np.full(2 * n, CONTIG, np.int64), np.full(2 * n, 5, np.int32))


@pytest.fixture(scope="module")
def answers():
    cands = _batch()
    ext = AffineExtender()
    aln = ext.extend(cands, traceback=True)
    ed = BandedExtender()
    return cands, ext, aln, ed, ed.extend(cands, traceback=True)


def _broken(aln, **changes):
    out = copy.deepcopy(aln)
    for name, fn in changes.items():
        setattr(out, name, fn(getattr(out, name).copy()))
    return out


def test_valid_answers_pass(answers):
    cands, ext, aln, ed, ed_aln = answers
    assert aln.found.sum() >= 40 and ed_aln.found.sum() >= 40
    check_alignments(ext, cands, copy.deepcopy(aln), True)
    check_alignments(ext, cands, copy.deepcopy(aln), False)
    check_alignments(ed, cands, copy.deepcopy(ed_aln), True)
    check_candidates(Named(), Candidates(cands.read, cands.strand, cands.pos), len(cands.reads), 2 * CONTIG)


def _first_found(aln):
    return int(np.flatnonzero(aln.found)[0])


@pytest.mark.parametrize("rule, message", [
    ("edits", "more edits than its threshold"),
    ("start_low", "starts outside its contig"),
    ("op", "an op other than"),
    ("span", "covers 99 read bases of 100"),
    ("past_end", "runs past its contig's end"),
    ("nm", "disagrees with its edit count (NM 3, the CIGAR gives"),
    ("offsets", "not monotone"),
])
def test_each_broken_rule_is_named(answers, rule, message):
    cands, ext, aln, ed, ed_aln = answers
    i = _first_found(aln)
    k = int(aln.cigar_offsets[i])
    last = int(aln.cigar_offsets[i + 1]) - 1

    def set_at(pos, value):
        return lambda a: (a.__setitem__(pos, value), a)[1]
    changes = {
        "edits": dict(edits=set_at(i, -1)),
        "start_low": dict(start=set_at(i, -5)),
        "op": dict(cigar=set_at(k, np.uint32(int(aln.cigar[k]) & ~15 | 7))),
        "span": dict(cigar=set_at(last, np.uint32(((int(aln.cigar[last]) >> 4) - 1) << 4
                                                  | (int(aln.cigar[last]) & 15)))),
        "past_end": dict(start=set_at(i, CONTIG - 10)),
        "nm": dict(edits=set_at(i, 3) if aln.edits[i] != 3 else set_at(i, 4)),
        "offsets": dict(cigar_offsets=set_at(i + 1, aln.cigar_offsets[i] - 1)),
    }[rule]
    if rule == "nm":
        message = message.replace("NM 3", f"NM {3 if aln.edits[i] != 3 else 4}")
    bad = _broken(aln, **changes)
    with pytest.raises(PluginContractError) as err:
        check_alignments(ext, cands, bad, True)
    assert message in str(err.value) and "extender 'affine'" in str(err.value)


def test_inner_clip_is_refused(answers):
    cands, ext, aln, ed, ed_aln = answers
    i = _first_found(aln)
    k = int(aln.cigar_offsets[i])
    bad = copy.deepcopy(aln)
    # the first op split into an M, an S and an M: an S that is not at either end
    first = int(aln.cigar[k])
    ln = first >> 4
    assert first & 15 == 0 and ln >= 5
    ops = [np.uint32(2 << 4), np.uint32(1 << 4 | 4), np.uint32((ln - 3) << 4)]
    bad.cigar = np.concatenate([aln.cigar[:k], ops, aln.cigar[k + 1:]]).astype(np.uint32)
    bad.cigar_offsets = aln.cigar_offsets.copy()
    bad.cigar_offsets[i + 1:] += 2
    with pytest.raises(PluginContractError, match="an op other than"):
        check_alignments(ext, cands, bad, True)


def test_edit_scoring_rules(answers):
    cands, ext, aln, ed, ed_aln = answers
    i = _first_found(ed_aln)
    over = _broken(ed_aln, edits=lambda a: (a.__setitem__(i, cands.max_edits[i] + 1), a)[1])
    with pytest.raises(PluginContractError, match="more edits than its threshold"):
        check_alignments(ed, cands, over, True)
    score = _broken(ed_aln, score=lambda a: (a.__setitem__(i, a[i] + 1), a)[1])
    with pytest.raises(PluginContractError, match="score is not -edits"):
        check_alignments(ed, cands, score, True)
    # a scoring extender may report more edits than the threshold
    j = _first_found(aln)
    many = _broken(aln, edits=lambda a: (a.__setitem__(j, cands.max_edits[j] + 10), a)[1])
    check_alignments(ext, cands, many, False)


def test_the_first_rule_in_contract_order_wins(answers):
    cands, ext, aln, ed, ed_aln = answers
    f = np.flatnonzero(aln.found)
    # a later alignment with too many edits (rule 1) beats an earlier one past its contig end (rule 5)
    bad = _broken(aln, start=lambda a: (a.__setitem__(f[0], CONTIG - 10), a)[1],
                  edits=lambda a: (a.__setitem__(f[-1], -2), a)[1])
    with pytest.raises(PluginContractError, match="more edits than its threshold"):
        check_alignments(ext, cands, bad, True)
    # among alignments breaking the same rule, the first one is named
    bad = _broken(aln, edits=lambda a: (a.__setitem__(f[1], a[f[1]] + 7), a.__setitem__(f[2], a[f[2]] + 9), a)[2])
    with pytest.raises(PluginContractError, match=f"NM {aln.edits[f[1]] + 7}, the CIGAR gives {aln.edits[f[1]]}"):
        check_alignments(ext, cands, bad, True)


def test_shapes_and_missing_cigars(answers):
    cands, ext, aln, ed, ed_aln = answers
    short = copy.deepcopy(aln)
    short.score = short.score[:-1]
    with pytest.raises(PluginContractError, match="Alignments.score must hold"):
        check_alignments(ext, cands, short, True)
    none = Alignments(aln.found, aln.score, aln.edits, aln.start)
    with pytest.raises(PluginContractError, match="traceback=True needs cigar"):
        check_alignments(ext, cands, none, True)
    check_alignments(ext, cands, Alignments(aln.found, aln.score, aln.edits, aln.start), False)


@pytest.mark.parametrize("change, message", [
    (lambda r, s, p: (r.__setitem__(3, 10 ** 6), r, s, p)[1:], "a read outside the batch"),
    (lambda r, s, p: (r.__setitem__(0, -1), r, s, p)[1:], "a read outside the batch"),
    (lambda r, s, p: (s.__setitem__(5, 2), r, s, p)[1:], "strand is not 0 or 1"),
    (lambda r, s, p: (p.__setitem__(7, 3 * 2 * CONTIG), r, s, p)[1:], "far outside the reference"),
    (lambda r, s, p: (p.__setitem__(1, p[0]), r, s, p)[1:], "not sorted"),
    (lambda r, s, p: (r[::-1], s, p), "not sorted"),
])
def test_candidate_rules(answers, change, message):
    cands = answers[0]
    read, strand, pos = change(cands.read.copy(), cands.strand.copy(), cands.pos.copy())
    with pytest.raises(PluginContractError, match=message) as err:
        check_candidates(Named("s"), Candidates(read, strand, pos), len(cands.reads), 2 * CONTIG)
    assert "seeder 's'" in str(err.value)


def test_candidates_of_other_integer_types_and_shapes():
    read = np.array([0, 0, 1, 2], np.int64)
    strand = np.array([0, 1, 0, 0], np.int64)
    pos = np.array([5, 3, 9, 9], np.int32)
    check_candidates(Named(), Candidates(read, strand, pos), 3, 100)
    check_candidates(Named(), Candidates.empty(), 0, 100)
    with pytest.raises(PluginContractError, match="differ in shape"):
        check_candidates(Named(), Candidates(read, strand[:3], pos), 3, 100)
    with pytest.raises(PluginContractError, match="not sorted"):
        check_candidates(Named(), Candidates(read, np.array([1, 0, 0, 0]), pos), 3, 100)
