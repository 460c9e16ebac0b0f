//! Redaction of secret values from what agents (and the commands that run
//! their code) print, before ralph writes or shows any of it: the attempt
//! log, the parser (so learnings, notes, state, run records and the report),
//! the live display, `ralph log`. Pure: a set of values and a streaming
//! filter over bytes.
//!
//! What is caught (issue 31), on each line:
//! - a value as is, and once JSON string escapes are undone (`\uXXXX`,
//!   `\"`, `\n`, ...), up to `DECODE_LEVELS` times over (a JSON string
//!   quoting JSON): what `ralph log` decodes, or a reader decodes again,
//!   never becomes a secret;
//! - a value's beginning or end of at least `fragment_len` bytes, anywhere:
//!   a value cut in two (two stream events, two lines, two reads) always
//!   has one half that long, so no two consecutive lines put it back
//!   together.
//!
//! Not caught: other encodings (base64, hex, rot13, a value spelled over
//! many lines in short pieces). docs/security.md says so.

use std::sync::Arc;

/// What a redacted value becomes.
pub(crate) const MASK: &[u8] = b"***";

/// Values shorter than this are not redacted: a two-letter "secret" would
/// mangle ordinary output (and the `<ralph>` tags ralph reads in it), and
/// no real credential is that short.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// A beginning or end of a value this long (or half the value, when that
/// is shorter) is masked wherever it appears. Half: a value cut anywhere
/// leaves one piece at least that long. The cap keeps a long key's shared
/// prefix (`sk-ant-api03-`) from needing more; a 16-byte piece of a
/// random key is never ordinary text.
const FRAGMENT_CAP: usize = 16;

/// How many times JSON escapes are undone over one another.
const DECODE_LEVELS: usize = 4;

/// An incomplete line is held back until its end, up to this many bytes;
/// past that all but a tail that could hold one encoded value is passed.
const MAX_CARRY: usize = 64 * 1024;

/// The values to hide, longest first (so a secret that contains another is
/// hidden whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Secrets {
    values: Vec<Vec<u8>>,
    /// Bytes some value starts with / ends with (a quick filter).
    firsts: Vec<bool>,
    lasts: Vec<bool>,
    /// The letters after a backslash whose escape can change a match:
    /// `u` and `\\` always (an escaped escape), the others only when a
    /// value holds the character they stand for. A line with none of them
    /// is not decoded (most lines: `\n` and `\"` in ordinary output).
    escapes: Vec<u8>,
}

/// The shortest beginning or end of `value` that is masked alone.
fn fragment_len(value: &[u8]) -> usize {
    value.len().div_ceil(2).min(FRAGMENT_CAP)
}

impl Secrets {
    /// `values` as they are (escaped forms are found by decoding), short
    /// ones left out.
    pub(crate) fn new<I, S>(values: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out: Vec<Vec<u8>> = values
            .into_iter()
            .map(|v| v.as_ref().as_bytes().to_vec())
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            .collect();
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        let mut firsts = vec![false; 256];
        let mut lasts = vec![false; 256];
        for v in &out {
            firsts[usize::from(v[0])] = true;
            lasts[usize::from(v[v.len() - 1])] = true;
        }
        let mut escapes = vec![b'u', b'\\'];
        for (letter, c) in SIMPLE_ESCAPES {
            if *letter != b'\\' && out.iter().any(|v| v.contains(c)) {
                escapes.push(*letter);
            }
        }
        Secrets {
            values: out,
            firsts,
            lasts,
            escapes,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// A whole text with every secret replaced by `***` (what the web
    /// view sends).
    pub(crate) fn redact_str(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_string();
        }
        String::from_utf8_lossy(&self.redact(text.as_bytes())).into_owned()
    }

    /// `buf` with every match (see the module's doc) in it, or in what it
    /// decodes to, replaced by `***`.
    fn redact(&self, buf: &[u8]) -> Vec<u8> {
        let mut spans = Vec::new();
        // Level 0 is the bytes themselves; each further level undoes one
        // layer of escapes, `map` saying which raw bytes each byte came from.
        let mut view = buf.to_vec();
        let mut map: Vec<(usize, usize)> = (0..buf.len()).map(|i| (i, i + 1)).collect();
        for level in 0..=DECODE_LEVELS {
            for (a, b) in self.matches(&view) {
                spans.push((map[a].0, map[b - 1].1));
            }
            if level == DECODE_LEVELS {
                break;
            }
            if !self.may_decode_into_a_match(&view) {
                break;
            }
            let Some((next, from)) = unescape(&view) else {
                break;
            };
            map = from
                .iter()
                .map(|&(a, b)| (map[a].0, map[b - 1].1))
                .collect();
            view = next;
        }
        if spans.is_empty() {
            return buf.to_vec();
        }
        spans.sort_unstable();
        let mut out = Vec::with_capacity(buf.len());
        let mut at = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end) = spans[i];
            while i + 1 < spans.len() && spans[i + 1].0 <= end {
                i += 1;
                end = end.max(spans[i].1);
            }
            if start >= at {
                out.extend_from_slice(&buf[at..start]);
                out.extend_from_slice(MASK);
                at = end;
            } else if end > at {
                at = end;
            }
            i += 1;
        }
        out.extend_from_slice(&buf[at..]);
        out
    }

    /// Ranges of `text` to mask: a value's beginning of at least its
    /// fragment length (the whole value included), and such an end.
    fn matches(&self, text: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for i in 0..text.len() {
            let c = usize::from(text[i]);
            if self.firsts[c] {
                let rest = &text[i..];
                let best = self
                    .values
                    .iter()
                    .filter(|v| v[0] == text[i])
                    .filter_map(|v| {
                        let n = rest
                            .iter()
                            .zip(v.iter())
                            .take_while(|(a, b)| a == b)
                            .count();
                        (n >= fragment_len(v)).then_some(n)
                    })
                    .max();
                if let Some(n) = best {
                    out.push((i, i + n));
                }
            }
            if self.lasts[c] {
                let before = &text[..=i];
                let best = self
                    .values
                    .iter()
                    .filter(|v| v[v.len() - 1] == text[i])
                    .filter_map(|v| {
                        let n = before
                            .iter()
                            .rev()
                            .zip(v.iter().rev())
                            .take_while(|(a, b)| a == b)
                            .count();
                        (n >= fragment_len(v)).then_some(n)
                    })
                    .max();
                if let Some(n) = best {
                    out.push((i + 1 - n, i + 1));
                }
            }
        }
        out
    }

    /// True when `view` holds an escape that decoding could turn into (part
    /// of) a match.
    fn may_decode_into_a_match(&self, view: &[u8]) -> bool {
        view.windows(2)
            .any(|w| w[0] == b'\\' && self.escapes.contains(&w[1]))
    }

    /// How many bytes at most one value takes once escaped over and over
    /// (`\\\\u0041`...): an incomplete line's tail this long is held back.
    fn encoded_len(&self) -> usize {
        self.values.first().map_or(0, |v| v.len() * 16 + 16)
    }
}

/// JSON's one-letter escapes and what they stand for.
const SIMPLE_ESCAPES: &[(u8, u8)] = &[
    (b'"', b'"'),
    (b'\\', b'\\'),
    (b'/', b'/'),
    (b'b', 8),
    (b'f', 12),
    (b'n', b'\n'),
    (b'r', b'\r'),
    (b't', b'\t'),
];

/// Bytes, and for each byte the range of the text it was decoded from.
type Decoded = (Vec<u8>, Vec<(usize, usize)>);

/// One layer of JSON string escapes undone: the bytes, and for each byte
/// the range of `input` it came from. `None` when nothing was escaped.
/// Escapes are undone wherever they are (inside a string or not): a
/// plain-text agent may print JSON too, and masking a decoded match is
/// never wrong.
fn unescape(input: &[u8]) -> Option<Decoded> {
    if !input.contains(&b'\\') {
        return None;
    }
    let mut out = Vec::with_capacity(input.len());
    let mut from = Vec::with_capacity(input.len());
    let mut changed = false;
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'\\' && i + 1 < input.len() {
            let simple = SIMPLE_ESCAPES
                .iter()
                .find(|(letter, _)| *letter == input[i + 1])
                .map(|(_, c)| *c);
            if let Some(c) = simple {
                out.push(c);
                from.push((i, i + 2));
                i += 2;
                changed = true;
                continue;
            }
            if input[i + 1] == b'u' {
                if let Some(hi) = hex4(input, i + 2) {
                    let (ch, len) = match hi {
                        0xD800..=0xDBFF => match (input.get(i + 6..i + 8), hex4(input, i + 8)) {
                            (Some(b"\\u"), Some(lo @ 0xDC00..=0xDFFF)) => (
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)),
                                12,
                            ),
                            _ => (None, 6),
                        },
                        _ => (char::from_u32(hi), 6),
                    };
                    let ch = ch.unwrap_or(char::REPLACEMENT_CHARACTER);
                    let mut b = [0u8; 4];
                    for &byte in ch.encode_utf8(&mut b).as_bytes() {
                        out.push(byte);
                        from.push((i, i + len));
                    }
                    i += len;
                    changed = true;
                    continue;
                }
            }
        }
        out.push(input[i]);
        from.push((i, i + 1));
        i += 1;
    }
    changed.then_some((out, from))
}

/// The four hex digits at `at`, as a number.
fn hex4(input: &[u8], at: usize) -> Option<u32> {
    let digits = input.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// A filter over one output stream. Lines are redacted whole: an
/// incomplete line is held back until its end (or `MAX_CARRY`), so a value
/// written a byte at a time is seen whole; a value cut across lines shows
/// neither half long enough to matter (see the module's doc).
#[derive(Debug)]
pub(crate) struct Stream {
    secrets: Arc<Secrets>,
    carry: Vec<u8>,
}

impl Stream {
    pub(crate) fn new(secrets: Arc<Secrets>) -> Stream {
        Stream {
            secrets,
            carry: Vec::new(),
        }
    }

    /// The bytes of `chunk` (after what was held back) that are safe to
    /// pass on, secrets replaced.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.secrets.is_empty() {
            return chunk.to_vec();
        }
        self.carry.extend_from_slice(chunk);
        let mut cut = self
            .carry
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |nl| nl + 1);
        if self.carry.len() - cut > MAX_CARRY {
            cut = self.carry.len() - self.secrets.encoded_len().min(MAX_CARRY);
        }
        if cut == 0 {
            return Vec::new();
        }
        let rest = self.carry.split_off(cut);
        let done = std::mem::replace(&mut self.carry, rest);
        self.secrets.redact(&done)
    }

    /// What was held back, at the end of the stream.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.carry);
        if rest.is_empty() {
            return rest;
        }
        self.secrets.redact(&rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(v: &[&str]) -> Arc<Secrets> {
        Arc::new(Secrets::new(v.iter().copied()))
    }

    #[test]
    fn whole_values_are_masked() {
        let s = Secrets::new(["sk-ant-12345678"]);
        assert_eq!(
            s.redact_str("key=sk-ant-12345678 and sk-ant-12345678\n"),
            "key=*** and ***\n"
        );
    }

    #[test]
    fn short_values_are_left_alone() {
        let s = Secrets::new(["fake", "", "1234567"]);
        assert!(s.is_empty());
        assert_eq!(s.redact_str("a fake key 1234567"), "a fake key 1234567");
    }

    #[test]
    fn the_longer_of_two_overlapping_secrets_goes_whole() {
        let s = Secrets::new(["abcdefgh", "abcdefgh-more-1"]);
        assert_eq!(s.redact_str("x abcdefgh-more-1 y"), "x *** y");
        // Its first half is masked as a fragment of the longer one.
        assert_eq!(s.redact_str("x abcdefgh-less y"), "x ***less y");
    }

    #[test]
    fn json_quoted_form_is_masked_too() {
        let s = Secrets::new([r#"pa"ss\word12"#]);
        let line = serde_json::json!({ "text": r#"it is pa"ss\word12"# }).to_string();
        assert_eq!(s.redact_str(&line), r#"{"text":"it is ***"}"#);
    }

    #[test]
    fn a_value_split_across_chunks_is_caught() {
        let mut st = Stream::new(secrets(&["TOPSECRET-value-42"]));
        let mut out = st.push(b"line one\nprefix TOPSEC");
        assert_eq!(out, b"line one\n");
        out.extend(st.push(b"RET-val"));
        out.extend(st.push(b"ue-42 end\n"));
        out.extend(st.finish());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "line one\nprefix *** end\n"
        );
    }

    #[test]
    fn every_split_point_is_caught() {
        let secret = "ghp_abcdefghijklmnop";
        let text = format!("a {secret} b {secret}\n");
        for cut in 0..=text.len() {
            let mut st = Stream::new(secrets(&[secret]));
            let mut out = st.push(&text.as_bytes()[..cut]);
            out.extend(st.push(&text.as_bytes()[cut..]));
            out.extend(st.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "a *** b ***\n",
                "cut {cut}"
            );
        }
    }

    #[test]
    fn a_false_start_is_released() {
        let mut st = Stream::new(secrets(&["TOPSECRET-value"]));
        assert_eq!(st.push(b"TOPSEC"), b"");
        assert_eq!(st.push(b"TION\n"), b"TOPSECTION\n");
        assert_eq!(st.push(b"TOPS"), b"");
        assert_eq!(st.finish(), b"TOPS");
    }

    #[test]
    fn complete_lines_are_never_held_back() {
        let mut st = Stream::new(secrets(&["TOPSECRET-value"]));
        assert_eq!(st.push(b"hello\n"), b"hello\n");
    }

    #[test]
    fn no_secrets_passes_everything() {
        let mut st = Stream::new(Arc::new(Secrets::default()));
        assert_eq!(st.push(b"abc"), b"abc");
        assert_eq!(st.finish(), b"");
    }

    const KEY: &str = "sk-ant-api03-Zq8vR2mT5xW1yB7nK4pL9cD3fH6jG0sA";

    /// Every character of `s` as a `\\uXXXX` escape.
    fn escaped(s: &str) -> String {
        s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
    }

    #[test]
    fn a_value_escaped_whole_is_masked_and_its_json_stays_valid() {
        let s = Secrets::new([KEY]);
        let line = format!(r#"{{"type":"text","text":"key {} end"}}"#, escaped(KEY));
        let out = s.redact_str(&line);
        assert_eq!(out, r#"{"type":"text","text":"key *** end"}"#);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["text"], "key *** end");
    }

    #[test]
    fn a_value_partly_escaped_or_escaped_twice_is_masked() {
        let s = Secrets::new([KEY]);
        let half = format!("{}{}", &KEY[..10], escaped(&KEY[10..]));
        assert_eq!(s.redact_str(&format!("a {half} b")), "a *** b");
        // A JSON string quoting JSON: `\\u0073`, decoded twice.
        let twice = escaped(KEY).replace('\\', "\\\\");
        assert_eq!(s.redact_str(&format!("a {twice} b")), "a *** b");
        let upper = escaped(KEY).to_uppercase().replace("\\U", "\\u");
        assert_eq!(s.redact_str(&format!("a {upper} b")), "a *** b");
    }

    #[test]
    fn surrogate_pairs_and_simple_escapes_decode() {
        let (out, from) = unescape(br#"a\ud83d\ude00\n\"b"#).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\u{1F600}\n\"b");
        assert_eq!(from[1], (1, 13));
        assert_eq!(unescape(b"no escapes"), None);
        assert_eq!(unescape(br#"\q\u12"#), None, "not escapes: left alone");
    }

    #[test]
    fn a_value_split_across_two_events_shows_neither_half() {
        let s = Secrets::new([KEY]);
        for cut in 1..KEY.len() {
            let text = format!(
                "{{\"text\":\"say {}\"}}\n{{\"text\":\"{} now\"}}\n",
                &KEY[..cut],
                escaped(&KEY[cut..])
            );
            let out = s.redact_str(&text);
            // What a reader sees of both events, decoded and put together.
            let decoded: String = out
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["text"].clone())
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            assert!(!decoded.contains(KEY), "cut {cut}: {decoded}");
            let longer = if cut * 2 >= KEY.len() {
                &KEY[..cut]
            } else {
                &KEY[cut..]
            };
            assert!(!decoded.contains(longer), "cut {cut}: {decoded}");
        }
    }

    #[test]
    fn a_value_written_a_byte_at_a_time_is_masked() {
        let mut st = Stream::new(secrets(&[KEY]));
        let text = format!("x {} y\n", escaped(KEY));
        let mut out = Vec::new();
        for b in text.as_bytes() {
            out.extend(st.push(&[*b]));
        }
        out.extend(st.finish());
        assert_eq!(String::from_utf8(out).unwrap(), "x *** y\n");
    }

    #[test]
    fn an_endless_line_is_passed_on_all_the_same() {
        let mut st = Stream::new(secrets(&[KEY]));
        let out = st.push(&vec![b'a'; MAX_CARRY + 10_000]);
        assert!(out.len() >= MAX_CARRY, "{}", out.len());
        let mut all = out;
        all.extend(st.push(format!("{KEY} b").as_bytes()));
        all.extend(st.finish());
        let all = String::from_utf8(all).unwrap();
        assert!(all.ends_with("a*** b"), "{}", &all[all.len() - 20..]);
    }
}
