// Command goverify is an auditor's verifier for a log published in the C2SP formats
// (tlog-checkpoint in a signed-note, tlog-tiles, tlog-cosignature), built on Go's
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog and the standard
// library: none of governed-memory's code. The tests build it and check with it what
// the Python writer published; docs/compliance.md shows an auditor using it.
//
// Build (no module proxy needed; Debian ships x/mod as golang-golang-x-mod-dev):
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o goverify ./tests/audit/goverify
//
// Commands (BASE is a directory or an http(s):// prefix serving the tiles; a key is a
// verifier key "<name>+<hex id>+<base64>" or a file holding one per line):
//
//	goverify note -log-key K [-witness W]... [-quorum Q] [-origin O] NOTE...
//	goverify tiles -base BASE -log-key K [-witness W]... [-quorum Q] [-strict]
//	goverify inclusion -base BASE -log-key K [-checkpoint NOTE] (-index I | -proof P | -all) [-entry F] [-repeat N]
//	goverify consistency -base BASE -log-key K -old NOTE [-new NOTE] [-proof P]
//
// Exit 0: verified; 1: refused (the reason on stderr, "REFUSED ..."); 2: bad usage.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

var errNotFound = errors.New("not found")

type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }

func refuse(format string, args ...interface{}) error {
	return refusal{fmt.Sprintf(format, args...)}
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// keys reads verifier keys given inline or as files of one key a line.
func keys(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		if strings.Count(v, "+") >= 2 && !strings.ContainsAny(v, "\n") {
			if _, err := os.Stat(v); err != nil {
				out = append(out, v)
				continue
			}
		}
		data, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: neither a verifier key nor a readable file", v)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	return out, nil
}

// cosigVerifier verifies C2SP tlog-cosignature "cosignature/v1" (signature type 0x04)
// signatures: x/mod's note package parses the lines and matches name and key hash,
// this checks the timestamped Ed25519 signature.
type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
	seen map[string]uint64
}

func newCosigVerifier(vkey string) (*cosigVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 || len(parts[1]) != 8 {
		return nil, fmt.Errorf("malformed witness key %q", vkey)
	}
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return nil, fmt.Errorf("malformed witness key %q", vkey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 || raw[0] != 0x04 {
		return nil, fmt.Errorf("witness key %q is not a cosignature/v1 Ed25519 key", vkey)
	}
	sum := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	if binary.BigEndian.Uint32(sum[:4]) != uint32(hash) {
		return nil, fmt.Errorf("witness key %q: key hash does not match the key", vkey)
	}
	return &cosigVerifier{parts[0], uint32(hash), ed25519.PublicKey(raw[1:]), map[string]uint64{}}, nil
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }
func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig[:8])
	if ts >= 1<<63 {
		return false
	}
	signed := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", ts)), msg...)
	if !ed25519.Verify(v.key, signed, sig[8:]) {
		return false
	}
	v.seen[string(msg)] = ts
	return true
}

type policy struct {
	logKey    string
	witnesses []string
	quorum    int
	origin    string
}

func addPolicyFlags(fs *flag.FlagSet) (*string, *listFlag, *int, *string) {
	logKey := fs.String("log-key", "", "the log's verifier key (or a file holding it)")
	witnesses := &listFlag{}
	fs.Var(witnesses, "witness", "a witness's cosignature/v1 verifier key (repeatable)")
	quorum := fs.Int("quorum", -1, "how many witnesses must have cosigned (default: all given)")
	origin := fs.String("origin", "", "the origin the checkpoint must state")
	return logKey, witnesses, quorum, origin
}

func makePolicy(logKey *string, witnesses *listFlag, quorum *int, origin *string) (policy, error) {
	if *logKey == "" {
		return policy{}, fmt.Errorf("-log-key is required")
	}
	lk, err := keys([]string{*logKey})
	if err != nil || len(lk) != 1 {
		return policy{}, fmt.Errorf("-log-key: give one verifier key")
	}
	ws, err := keys(*witnesses)
	if err != nil {
		return policy{}, err
	}
	q := *quorum
	if q < 0 {
		q = len(ws)
	}
	if q > len(ws) {
		return policy{}, fmt.Errorf("a quorum of %d cannot be met by %d witnesses", q, len(ws))
	}
	return policy{lk[0], ws, q, *origin}, nil
}

type checkpoint struct {
	origin  string
	tree    tlog.Tree
	signers []string
}

// open verifies a signed checkpoint note under the policy and parses its body.
func open(data []byte, p policy) (checkpoint, error) {
	logVerifier, err := note.NewVerifier(p.logKey)
	if err != nil {
		return checkpoint{}, fmt.Errorf("-log-key: %v", err)
	}
	verifiers := []note.Verifier{logVerifier}
	var cosigners []*cosigVerifier
	for _, w := range p.witnesses {
		v, err := newCosigVerifier(w)
		if err != nil {
			return checkpoint{}, err
		}
		cosigners = append(cosigners, v)
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(data, note.VerifierList(verifiers...))
	if err != nil {
		return checkpoint{}, refuse("the checkpoint note does not verify: %v", err)
	}
	logSigned := false
	var signers []string
	for _, s := range n.Sigs {
		if s.Name == logVerifier.Name() && s.Hash == logVerifier.KeyHash() {
			logSigned = true
		}
	}
	if !logSigned {
		return checkpoint{}, refuse("the checkpoint is not signed by the log's key %s", logVerifier.Name())
	}
	signers = append(signers, logVerifier.Name())
	cosigned := 0
	for _, v := range cosigners {
		if ts, ok := v.seen[n.Text]; ok {
			cosigned++
			signers = append(signers, fmt.Sprintf("%s@%s", v.name, time.Unix(int64(ts), 0).UTC().Format(time.RFC3339)))
		}
	}
	if cosigned < p.quorum {
		return checkpoint{}, refuse("%d of %d witnesses cosigned, the policy requires %d", cosigned, len(cosigners), p.quorum)
	}
	cp, err := parseCheckpoint(n.Text)
	if err != nil {
		return checkpoint{}, err
	}
	if p.origin != "" && cp.origin != p.origin {
		return checkpoint{}, refuse("the checkpoint is of log %q, not %q", cp.origin, p.origin)
	}
	cp.signers = signers
	return cp, nil
}

// parseCheckpoint reads a C2SP tlog-checkpoint body: origin, size, base64 root.
// (x/mod's tlog.ParseTree reads only the go.sum database's own origin line.)
func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) != 4 || lines[0] == "" {
		return checkpoint{}, refuse("malformed checkpoint body")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, refuse("malformed checkpoint size %q", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return checkpoint{}, refuse("malformed checkpoint root %q", lines[2])
	}
	if !strings.HasSuffix(text, "\n") { // extension lines, if any, are opaque
		return checkpoint{}, refuse("the checkpoint body does not end in a newline")
	}
	var h tlog.Hash
	copy(h[:], root)
	if size == 0 && h != tlog.Hash(sha256.Sum256(nil)) {
		return checkpoint{}, refuse("the root of an empty tree is SHA-256 of nothing")
	}
	return checkpoint{origin: lines[0], tree: tlog.Tree{N: size, Hash: h}}, nil
}

// store fetches C2SP tiles and entry bundles from a directory or an HTTP prefix and
// serves them to x/mod's tlog as tlog.TileReader.
type store struct {
	base   string
	served int64 // the size of the checkpoint the base publishes
	reads  int
}

func (s *store) fetch(rel string) ([]byte, error) {
	s.reads++
	if strings.HasPrefix(s.base, "http://") || strings.HasPrefix(s.base, "https://") {
		resp, err := http.Get(strings.TrimSuffix(s.base, "/") + "/" + rel)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return nil, errNotFound
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: HTTP %d", rel, resp.StatusCode)
		}
		return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	}
	data, err := os.ReadFile(filepath.Join(s.base, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return nil, errNotFound
	}
	return data, err
}

// c2spPath maps x/mod's tile coordinates to the C2SP layout: x/mod writes
// tile/<H>/<L>/<N>[.p/<W>] and tile/<H>/data/<N> (the sumdb layout), C2SP drops the
// height (fixed at 8) and names the data level "entries".
func c2spPath(t tlog.Tile) string {
	p := "tile/" + strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", t.H))
	if t.L == -1 {
		p = "tile/entries/" + strings.TrimPrefix(p, "tile/data/")
	}
	return p
}

// readTile returns exactly tile t, falling back to a full or wider tile (of the size the
// base now serves) when a partial tile of an earlier size was replaced: tile hashes
// never change, only more follow.
func (s *store) readTile(t tlog.Tile) ([]byte, error) {
	widths := []int{t.W}
	if t.W < 1<<height {
		widths = append(widths, 1<<height)
		level := t.L
		if level < 0 {
			level = 0
		}
		count := s.served >> (uint(height) * uint(level))
		if w := count - t.N<<height; w > int64(t.W) && w < 1<<height {
			widths = append(widths, int(w))
		}
	}
	for _, w := range widths {
		u := t
		u.W = w
		data, err := s.fetch(c2spPath(u))
		if err == errNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.L == -1 {
			return data, nil
		}
		if len(data) < t.W*tlog.HashSize {
			return nil, refuse("%s holds %d bytes, fewer than %d hashes", c2spPath(u), len(data), t.W)
		}
		return data[:t.W*tlog.HashSize], nil
	}
	return nil, refuse("missing tile %s", c2spPath(t))
}

func (s *store) Height() int { return height }
func (s *store) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := s.readTile(t)
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}
func (s *store) SaveTiles([]tlog.Tile, [][]byte) {}

// entries splits an entry bundle: big-endian uint16 length-prefixed entries.
func entries(data []byte, width int, exact bool) ([][]byte, error) {
	var out [][]byte
	for len(data) > 0 && len(out) < width {
		if len(data) < 2 {
			return nil, refuse("an entry bundle ends inside a length prefix")
		}
		n := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+n {
			return nil, refuse("an entry bundle ends inside an entry")
		}
		out = append(out, data[2:2+n])
		data = data[2+n:]
	}
	if len(out) != width || (exact && len(data) != 0) {
		return nil, refuse("an entry bundle holds the wrong number of entries (want %d)", width)
	}
	return out, nil
}

func (s *store) entry(index, size int64) ([]byte, error) {
	n := index >> height
	w := size - n<<height
	if w > 1<<height {
		w = 1 << height
	}
	data, err := s.readTile(tlog.Tile{H: height, L: -1, N: n, W: int(w)})
	if err != nil {
		return nil, err
	}
	es, err := entries(data, int(w), false)
	if err != nil {
		return nil, err
	}
	return es[index-n<<height], nil
}

// openBase opens the checkpoint the base publishes: the log's signature is required
// there (it says which tiles exist); the witness policy applies to the checkpoint a
// proof is checked against, which opened returns (the served one unless another is
// given).
func openBase(base, other string, p policy) (*store, checkpoint, error) {
	s := &store{base: base}
	data, err := s.fetch("checkpoint")
	if err != nil {
		return nil, checkpoint{}, refuse("cannot fetch %s/checkpoint: %v", base, err)
	}
	served, err := open(data, policy{logKey: p.logKey, origin: p.origin})
	if err != nil {
		return nil, checkpoint{}, err
	}
	s.served = served.tree.N
	if other != "" {
		if data, err = os.ReadFile(other); err != nil {
			return nil, checkpoint{}, err
		}
	}
	cp, err := open(data, p)
	if err != nil {
		return nil, checkpoint{}, err
	}
	if cp.origin != served.origin {
		return nil, checkpoint{}, refuse("the checkpoint is of log %q, %s serves %q", cp.origin, base, served.origin)
	}
	if cp.tree.N > s.served {
		return nil, checkpoint{}, refuse("the checkpoint (%d entries) is ahead of what %s serves (%d)", cp.tree.N, base, s.served)
	}
	return s, cp, nil
}

func openFile(path string, p policy) (checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return checkpoint{}, err
	}
	return open(data, p)
}

// ourProof is governed-memory's JSON proof document, read only for its path.
type ourProof struct {
	EventID    string   `json:"event_id"`
	LeafIndex  *int64   `json:"leaf_index"`
	TreeSize   int64    `json:"tree_size"`
	AuditPath  []string `json:"audit_path"`
	FirstSize  int64    `json:"first_size"`
	SecondSize int64    `json:"second_size"`
	Path       []string `json:"path"`
}

func readProof(path string) (ourProof, error) {
	var p ourProof
	data, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, refuse("%s: not a proof document: %v", path, err)
	}
	return p, nil
}

func hashes(hexes []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(hexes))
	for i, h := range hexes {
		raw, err := hex.DecodeString(h)
		if err != nil || len(raw) != tlog.HashSize {
			return nil, refuse("a proof hash is not 32 bytes of hex")
		}
		copy(out[i][:], raw)
	}
	return out, nil
}

func cmdNote(args []string) error {
	fs := flag.NewFlagSet("note", flag.ExitOnError)
	lk, ws, q, o := addPolicyFlags(fs)
	fs.Parse(args)
	p, err := makePolicy(lk, ws, q, o)
	if err != nil || fs.NArg() < 1 {
		return usage(err)
	}
	if fs.NArg() > 1 { // one line per note, for checking many altered copies at once
		refused := 0
		for _, path := range fs.Args() {
			if _, err := openFile(path, p); err != nil {
				refused++
				fmt.Printf("REFUSED %s: %v\n", path, err)
			} else {
				fmt.Printf("OK %s\n", path)
			}
		}
		if refused > 0 {
			return refuse("%d of %d notes refused", refused, fs.NArg())
		}
		return nil
	}
	cp, err := openFile(fs.Arg(0), p)
	if err != nil {
		return err
	}
	fmt.Printf("OK checkpoint of %s: %d entries, root %s, signed by %s\n", cp.origin, cp.tree.N,
		cp.tree.Hash, strings.Join(cp.signers, ", "))
	return nil
}

// cmdTiles recomputes everything from the entry bundles with x/mod's tlog: each
// entry's record hash, every stored hash, the tree hash (must be the signed root) and
// every tile's bytes (must be those served).
func cmdTiles(args []string) error {
	fs := flag.NewFlagSet("tiles", flag.ExitOnError)
	base := fs.String("base", "", "the log's directory or URL prefix")
	strict := fs.Bool("strict", false, "refuse files under tile/ that the tree does not have (directories only)")
	lk, ws, q, o := addPolicyFlags(fs)
	fs.Parse(args)
	p, err := makePolicy(lk, ws, q, o)
	if err != nil || *base == "" {
		return usage(err)
	}
	s, cp, err := openBase(*base, "", p)
	if err != nil {
		return err
	}
	n := cp.tree.N
	if n == 0 {
		fmt.Printf("OK %s: the empty tree\n", cp.origin)
		return nil
	}
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			if x < 0 || x >= int64(len(stored)) {
				return nil, fmt.Errorf("hash %d not stored", x)
			}
			out[i] = stored[x]
		}
		return out, nil
	})
	expected := map[string]bool{}
	bundles := 0
	for start := int64(0); start < n; start += 1 << height {
		w := n - start
		if w > 1<<height {
			w = 1 << height
		}
		t := tlog.Tile{H: height, L: -1, N: start >> height, W: int(w)}
		data, err := s.fetch(c2spPath(t))
		if err != nil {
			return refuse("entry bundle %s: %v", c2spPath(t), err)
		}
		expected[c2spPath(t)] = true
		es, err := entries(data, int(w), true)
		if err != nil {
			return refuse("%s: %v", c2spPath(t), err)
		}
		for i, e := range es {
			hs, err := tlog.StoredHashes(start+int64(i), e, reader)
			if err != nil {
				return err
			}
			stored = append(stored, hs...)
		}
		bundles++
	}
	th, err := tlog.TreeHash(n, reader)
	if err != nil {
		return err
	}
	if th != cp.tree.Hash {
		return refuse("the entries hash to root %s, the checkpoint states %s", th, cp.tree.Hash)
	}
	tiles := 0
	for level := 0; n>>(uint(height)*uint(level)) > 0; level++ {
		count := n >> (uint(height) * uint(level))
		for index := int64(0); index<<height < count; index++ {
			w := count - index<<height
			if w > 1<<height {
				w = 1 << height
			}
			t := tlog.Tile{H: height, L: level, N: index, W: int(w)}
			want, err := tlog.ReadTileData(t, reader)
			if err != nil {
				return err
			}
			got, err := s.fetch(c2spPath(t))
			if err != nil {
				return refuse("tile %s: %v", c2spPath(t), err)
			}
			if !bytes.Equal(got, want) {
				return refuse("tile %s differs from the tile the entries give", c2spPath(t))
			}
			expected[c2spPath(t)] = true
			tiles++
		}
	}
	if *strict {
		var extra []string
		root := filepath.Join(*base, "tile")
		filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				rel, _ := filepath.Rel(*base, path)
				if !expected[filepath.ToSlash(rel)] {
					extra = append(extra, filepath.ToSlash(rel))
				}
			}
			return nil
		})
		if len(extra) > 0 {
			sort.Strings(extra)
			return refuse("files the tree does not have: %s", strings.Join(extra, ", "))
		}
	}
	fmt.Printf("OK %s: %d entries, %d tiles and %d entry bundles give the signed root %s (signed by %s)\n",
		cp.origin, n, tiles, bundles, cp.tree.Hash, strings.Join(cp.signers, ", "))
	return nil
}

func cmdInclusion(args []string) error {
	fs := flag.NewFlagSet("inclusion", flag.ExitOnError)
	base := fs.String("base", "", "the log's directory or URL prefix")
	cpFile := fs.String("checkpoint", "", "prove against this checkpoint note (default: the one BASE serves)")
	index := fs.Int64("index", -1, "the entry's index (leaf index, from 0)")
	entryFile := fs.String("entry", "", "the entry's bytes (a trailing newline is dropped); default: from its bundle")
	proofFile := fs.String("proof", "", "also check this governed-memory inclusion proof's audit path")
	repeat := fs.Int("repeat", 0, "time this many proofs at random indices (tiles read each time)")
	all := fs.Bool("all", false, "prove every entry of the tree, each read from its bundle")
	lk, ws, q, o := addPolicyFlags(fs)
	fs.Parse(args)
	p, err := makePolicy(lk, ws, q, o)
	if err != nil || *base == "" {
		return usage(err)
	}
	s, cp, err := openBase(*base, *cpFile, p)
	if err != nil {
		return err
	}
	n := cp.tree.N
	if *repeat > 0 {
		return timeInclusion(s, cp.tree, *repeat)
	}
	if *all {
		reader := tlog.TileHashReader(cp.tree, s)
		for i := int64(0); i < n; i++ {
			entry, err := s.entry(i, n)
			if err != nil {
				return err
			}
			rp, err := tlog.ProveRecord(n, i, reader)
			if err != nil {
				return refuse("cannot prove entry %d from the tiles: %v", i, err)
			}
			if err := tlog.CheckRecord(rp, n, cp.tree.Hash, i, tlog.RecordHash(entry)); err != nil {
				return refuse("entry %d is not in the tree of %d entries: %v", i, n, err)
			}
		}
		fmt.Printf("OK all %d entries of %s are in the tree\n", n, cp.origin)
		return nil
	}
	var proof ourProof
	if *proofFile != "" {
		if proof, err = readProof(*proofFile); err != nil {
			return err
		}
		if proof.LeafIndex == nil {
			return refuse("%s is not an inclusion proof", *proofFile)
		}
		if *index >= 0 && *index != *proof.LeafIndex {
			return refuse("-index %d, the proof is for index %d", *index, *proof.LeafIndex)
		}
		*index = *proof.LeafIndex
	}
	if *index < 0 || *index >= n {
		return refuse("index %d is not in a tree of %d entries", *index, n)
	}
	var entry []byte
	if *entryFile != "" {
		data, err := os.ReadFile(*entryFile)
		if err != nil {
			return err
		}
		entry = bytes.TrimSuffix(data, []byte("\n"))
	} else if entry, err = s.entry(*index, n); err != nil {
		return err
	}
	if proof.EventID != "" {
		var value struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(entry, &value) != nil || value.EventID != proof.EventID {
			return refuse("the entry is not event %s", proof.EventID)
		}
	}
	leaf := tlog.RecordHash(entry)
	rp, err := tlog.ProveRecord(n, *index, tlog.TileHashReader(cp.tree, s))
	if err != nil {
		return refuse("cannot prove entry %d from the tiles: %v", *index, err)
	}
	if err := tlog.CheckRecord(rp, n, cp.tree.Hash, *index, leaf); err != nil {
		return refuse("entry %d is not in the tree of %d entries: %v", *index, n, err)
	}
	if *proofFile != "" {
		if proof.TreeSize != n {
			return refuse("the proof is for a tree of %d entries, the checkpoint's has %d", proof.TreeSize, n)
		}
		path, err := hashes(proof.AuditPath)
		if err != nil {
			return err
		}
		if err := tlog.CheckRecord(tlog.RecordProof(path), n, cp.tree.Hash, *index, leaf); err != nil {
			return refuse("the proof's audit path does not verify: %v", err)
		}
	}
	fmt.Printf("OK entry %d (leaf %s) is in %s at %d entries%s\n", *index, leaf, cp.origin, n,
		map[bool]string{true: ", and so is the proof's path", false: ""}[*proofFile != ""])
	return nil
}

func timeInclusion(s *store, tree tlog.Tree, repeat int) error {
	rng := rand.New(rand.NewSource(32))
	s.reads = 0
	start := time.Now()
	for i := 0; i < repeat; i++ {
		index := rng.Int63n(tree.N)
		reader := tlog.TileHashReader(tree, s)
		rp, err := tlog.ProveRecord(tree.N, index, reader)
		if err != nil {
			return err
		}
		leaf, err := reader.ReadHashes([]int64{tlog.StoredHashIndex(0, index)})
		if err != nil {
			return err
		}
		if err := tlog.CheckRecord(rp, tree.N, tree.Hash, index, leaf[0]); err != nil {
			return err
		}
	}
	took := time.Since(start)
	fmt.Printf("{\"proofs\": %d, \"us_per_proof\": %.1f, \"tile_reads_per_proof\": %.1f}\n", repeat,
		float64(took.Microseconds())/float64(repeat), float64(s.reads)/float64(repeat))
	return nil
}

func cmdConsistency(args []string) error {
	fs := flag.NewFlagSet("consistency", flag.ExitOnError)
	base := fs.String("base", "", "the log's directory or URL prefix")
	oldFile := fs.String("old", "", "the earlier checkpoint note")
	newFile := fs.String("new", "", "the later checkpoint note (default: the one BASE serves)")
	proofFile := fs.String("proof", "", "also check this governed-memory consistency proof's path")
	lk, ws, q, o := addPolicyFlags(fs)
	fs.Parse(args)
	p, err := makePolicy(lk, ws, q, o)
	if err != nil || *base == "" || *oldFile == "" {
		return usage(err)
	}
	s, later, err := openBase(*base, *newFile, p)
	if err != nil {
		return err
	}
	// The earlier checkpoint: the log's signature is required, witnesses are not (they
	// vouch for the latest view).
	earlier, err := openFile(*oldFile, policy{logKey: p.logKey, origin: p.origin})
	if err != nil {
		return err
	}
	if earlier.origin != later.origin {
		return refuse("the checkpoints are of two logs: %q and %q", earlier.origin, later.origin)
	}
	n1, n2 := earlier.tree.N, later.tree.N
	if n1 > n2 {
		return refuse("the earlier checkpoint (%d entries) is larger than the later (%d)", n1, n2)
	}
	switch {
	case n1 == 0:
		// the empty tree precedes every tree; x/mod's CheckTree takes sizes from 1
	case n1 == n2:
		if earlier.tree.Hash != later.tree.Hash {
			return refuse("two roots for %d entries: a fork", n1)
		}
	default:
		tp, err := tlog.ProveTree(n2, n1, tlog.TileHashReader(later.tree, s))
		if err != nil {
			return refuse("cannot prove consistency from the tiles: %v", err)
		}
		if err := tlog.CheckTree(tp, n2, later.tree.Hash, n1, earlier.tree.Hash); err != nil {
			return refuse("the tree of %d entries does not extend the tree of %d: %v", n2, n1, err)
		}
	}
	if *proofFile != "" {
		proof, err := readProof(*proofFile)
		if err != nil {
			return err
		}
		if proof.FirstSize != n1 || proof.SecondSize != n2 {
			return refuse("the proof is from %d to %d entries, the checkpoints are of %d and %d",
				proof.FirstSize, proof.SecondSize, n1, n2)
		}
		path, err := hashes(proof.Path)
		if err != nil {
			return err
		}
		if n1 == 0 || n1 == n2 {
			if len(path) != 0 {
				return refuse("a proof from the empty tree or to the same size is empty")
			}
		} else if err := tlog.CheckTree(tlog.TreeProof(path), n2, later.tree.Hash, n1, earlier.tree.Hash); err != nil {
			return refuse("the proof's path does not verify: %v", err)
		}
	}
	fmt.Printf("OK %s at %d entries extends itself at %d entries (signed by %s)\n", later.origin, n2, n1,
		strings.Join(later.signers, ", "))
	return nil
}

func usage(err error) error {
	if err == nil {
		err = errors.New("missing arguments")
	}
	return fmt.Errorf("usage: %v", err)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: goverify note|tiles|inclusion|consistency [flags]")
		os.Exit(2)
	}
	commands := map[string]func([]string) error{
		"note": cmdNote, "tiles": cmdTiles, "inclusion": cmdInclusion, "consistency": cmdConsistency,
	}
	command, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	err := command(os.Args[2:])
	var r refusal
	switch {
	case err == nil:
	case errors.As(err, &r):
		fmt.Fprintln(os.Stderr, "REFUSED", r.msg)
		os.Exit(1)
	case strings.HasPrefix(err.Error(), "usage:"):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "REFUSED", err)
		os.Exit(1)
	}
}
