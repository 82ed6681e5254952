"""Answer the failure queue: make exact what each message names, then delete it; keep what is not exact yet.

The failure queue holds five kinds of messages:
- the mapping's on-failure record (`DDBStreamBatchInfo`: stream, shard, sequence range; no data),
  for a batch or window it gave up on. Those records stay in the stream (24 hours) behind the
  shard's checkpoint, and the aggregator counts from its checkpoint: recover reads the range
  (through empty pages, to the range's end or the shard's end) to name the aggregates it touches,
  invokes the deployed aggregator directly with `throughSequenceNumber` = the range's end unless the
  shard's progress `Checkpoint` already passed it, and deletes the message only once the
  checkpoint is at or past the end (everything at or below it is counted). With one reader per shard
  (the module's `stream_readers = 1`) there is no checkpoint: recover invokes the aggregator with
  `{"readBack": <the record's DDBStreamBatchInfo>}`, which reads the range back and applies it by its
  ledger items' versions (a momentary reader of the shard; recover reads nothing of it itself), and
  deletes the message once it answers "applied"; a range it answers "trimmed" or "unreadable" is
  repaired as `records_trimmed` is: with one reader per shard, every repair is the rebase of each
  download's ledger item to the table's item (rebase.py), never a recount of the aggregates alone,
  then each aggregate the messages name whose count the ledger does not explain set to what it
  counts (drift.py); a message is deleted once a recount that writes nothing finds it exact and no
  key the rebase left (gone, unplaced) counts in what it names;
- `records_trimmed` (the aggregator's checkpoint fell behind the stream's retention): the lost
  records' downloads could be of any board (their timestamps are the writers'), so every board of
  the table is recounted and repaired;
- `refused_record`: its aggregate (when the message or its record names one) is recounted;
- `rejected_download`: a malformed download, never countable: reported with the item's key (the stream record the
  message holds names it), so that the item can be fixed, and how the fix must be written to count in the
  deployment's mode (advice.py), then deleted;
- `recount_band`, a band whose repair never closed it: a repair records each band in the band queue,
  delayed toward its deadline, and the aggregator meets the record there then and copies it here if
  the band is still open (without the band queue, the repair records it here itself; recover reads
  the band queue too, and answers its records the same way). Deleted with nothing to do once the
  aggregate no longer carries that band (closed, or replaced by a later repair, which recorded its
  own); kept while the band is open and its deadline has not passed on DynamoDB's clock; past it
  (the repair was killed), the aggregate is recounted and repaired, which replaces the band with
  one this run closes.

All recounts of a run happen at once, in one `reconcile --repair` pass over every board the
messages name. A message is deleted only when everything it names is exact; an aggregate with
downloads still in flight is pending, and its messages wait for the next run. While recover works
it keeps its messages invisible to other consumers, renewing their visibility timeout.
"""

from leaderboard_tools.recover.recovery import Pacing, RecoveryReport, recover

__all__ = ["Pacing", "RecoveryReport", "recover"]
