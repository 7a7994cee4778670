// Package memory is the daemon's long-term memory: explicit facts with
// their provenance, a full-text index of what Tasks record, search over it,
// and the recall that gives every Cycle relevant evidence from the owner's
// other Tasks. It implements actors.Memory over persistence.Store.
//
// What is indexed: user messages, assistant messages, retained tool
// results, facts, and failures (tool failures other than cancellations,
// Cycle and Task failures). Live results that were not retained are not
// indexed: after a restart they no longer exist. Memory is scoped by owner:
// every index record lives under its owner, and a search or a recall only
// ever reads the owner's records.
//
// Durability: the Task actor asks Postings for the index records of the
// events it appends and commits them in the same Badger transaction as the
// events, so after any crash the index holds exactly the indexable events
// the log holds. Each Task's index watermark (its last indexed seq) is in
// the same commit; Open indexes what history holds beyond a watermark (a
// store that ran without the memory), so the index is never behind. A fact
// is committed through the Task log's writer with its index record, its
// source Task named as the append's Task.
//
// Index structure: a freshly indexed record is a pending document (its
// terms and frequencies, its kind, time, length and content hash). A
// background indexer builds pending documents into immutable segments
// (term blocks with posting lists, per-document columns, a document table),
// in bounded commits, and makes a segment live in one final commit that
// also deletes the pending documents it holds; segments of one size tier
// are merged the same way. A crash between those commits leaves blocks of
// a segment that never became live, which Open deletes. Pending documents
// are found through an in-memory tracker of their keys, checked against
// the query's snapshot, rather than by scanning a key range that Badger
// fills with deletion markers (see pending.go). A search reads the
// segments and the pending documents of one snapshot, so where a record is
// stored never changes whether or how it matches.
//
// Ranking is Okapi BM25 with exact corpus statistics, ties broken by
// recency (see search.go). Terms are Snowball English stems (tokenize.go).
// An event's record over 1,536 bytes is indexed as overlapping passages of
// about 1 KB (passage.go), each a document naming its record and byte
// range: a long record ranks by its best passage and is shown as it. The
// memory format names how documents are made, and Open indexes a store of
// an older format again from its history and facts (reindex.go).
//
// Recall (recall.go, rank.go; measured in docs/memory.md) queries with the
// Task's request and latest focus (its 16 most specific terms). The Task's
// own records leave the query's statistics (a word only its request holds
// cannot raise the bar), and a record's relevance is its score over that
// of a perfect match of the three most specific terms that some record
// other than a request holds. Candidates need relevance Options.
// MinRelevance (0.2, calibrated on the evaluation) and two of the query's
// terms (one shared word is not relevance). A matched request brings its
// Task's answer and facts, a matched tool result the conclusion drawn from
// it; requests weigh half (they restate a question without its answer),
// times the share of their words the query holds. A second hop (hop.go)
// asks what the best first records leave open of the query of the names
// they state beside the query's words, and adds the records that name one
// and hold an open word (with their episodes), each ranked below its
// source by how much of the query the two hold together; a third hop
// goes on from the second's best records the same way. Ranking
// multiplies relevance by kind, hop and recency weights; a later answer, tool result or fact of another Task
// that restates most of an earlier one's subject supersedes it (ranked
// just below, labelled "superseded by <ref>, <time>", unless the query
// names a value only the earlier one states); facts superseded
// explicitly are not recalled. A request recalled with its Task's answer
// is shown with the answer ("[in answer to: ...]"), not as an item of its
// own. The same content is recalled once, nothing
// already in the conversation is, and the items fit Options.RecallTokens
// (at most 8,000) as the prompt renders them: the token budget is the cap,
// and nothing is recalled when nothing is relevant. A long record is
// recalled as the passage that matched, labelled with where it lies and its
// tasks.read_block handle. Facts keep their source (where they came from),
// searchable and shown with their provenance.
//
// Semantic recall (optional, Options.Embedder; embed.go, vectors.go): a
// background embedder gives each indexed event record (each passage) and
// each fact a vector kept in Badger beside the lexical index, with a
// durable per-Task watermark, so it resumes after a restart; recall embeds its query, finds
// the nearest records (sign codes in memory, exact cosine of a shortlist)
// above a floor: Options.MinSimilarity, raised to the query's mean
// similarity to the owner's other records plus Options.MinSimilarityMargin
// (0.1 less for a record that holds a word of the query), and fuses them
// with the lexical first hop: a record's relevance is the
// larger of its lexical one and half its cosine's share above the floor
// (fuse in rank.go; measured against reciprocal rank fusion in
// docs/memory.md). A failing provider leaves recall lexical (logged, counted in
// EmbeddingStatus); it never fails a Cycle.
//
// Recall only reads: scores depend on nothing but the indexed records and
// the query, so recalling an item never raises its score, and recalled
// text is never written back (the Cycle records only which items it was
// given, which is not indexed). Recall therefore never reinforces itself,
// which makes reuse exact: a Cycle whose query is unchanged since its
// Task's previous one gets that result again while the owner's index
// gained only the Task's own records (recallcache.go). After other Tasks
// of the owner added records, an unchanged query still reuses its result
// for Options.RecallReuse Cycles in a row (memory.recall_reuse_cycles,
// default 4), so a result lags them by at most that many Cycles; 0 keeps
// reuse exact. Decoded record texts are cached (records are immutable).
//
// Lifecycle:
//  1. Open(ctx, store, Options{...}) after the store and before the daemon
//     starts: it checks the memory format, cleans up interrupted index
//     builds, catches the index up with history and starts the indexer
//     (and, with an Embedder, the embedder).
//  2. Pass the Memory as actors.Deps.Memory; the Task actor calls Postings,
//     the Cycle calls Recall, tool calls record facts through RecordFact.
//  3. Tools use Search and RecordFact (tools/memorytool).
//  4. Close after the daemon stopped and before the store closes.
//
// Example:
//
//	mem, err := memory.Open(ctx, store, memory.Options{Log: log})
//	if err != nil { ... }
//	defer mem.Close()
//	d, err := actors.Start(ctx, actors.Deps{Store: store, Memory: mem, ...}, opts)
//	hits, err := mem.Search(ctx, memory.Query{Owner: "alice", Text: "deploy key", Limit: 10, TextBytes: 500})
package memory
