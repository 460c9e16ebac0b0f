//! Redaction of secret values from what agents (and the commands that run
//! their code) print, before ralph writes or shows any of it: the attempt
//! log, the parser (so learnings, notes, state, run records and the report),
//! the live display. Pure: a set of values and a streaming filter over bytes.

use std::sync::Arc;

/// What a redacted value becomes.
pub(crate) const MASK: &[u8] = b"***";

/// Values shorter than this are not redacted: a two-letter "secret" would
/// mangle ordinary output (and the `<ralph>` tags ralph reads in it), and
/// no real credential is that short.
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// The values to hide, longest first (so a secret that contains another is
/// hidden whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Secrets {
    values: Vec<Vec<u8>>,
}

impl Secrets {
    /// `values` as they are, and as they appear inside a JSON string (the
    /// stream formats quote what a tool printed), short ones left out.
    pub(crate) fn new<I, S>(values: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for v in values {
            let v = v.as_ref();
            if v.len() < MIN_SECRET_LEN {
                continue;
            }
            out.push(v.as_bytes().to_vec());
            let quoted = serde_json::to_string(v).unwrap_or_default();
            let inner = quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or_default();
            if inner != v && !inner.is_empty() {
                out.push(inner.as_bytes().to_vec());
            }
        }
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        Secrets { values: out }
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
        let mut s = Stream::new(Arc::new(self.clone()));
        let mut out = s.push(text.as_bytes());
        out.extend(s.finish());
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The secret that starts at `at` in `buf`, if one does (the longest).
    fn match_at(&self, buf: &[u8], at: usize) -> Option<usize> {
        let rest = &buf[at..];
        self.values
            .iter()
            .find(|v| rest.starts_with(v))
            .map(Vec::len)
    }

    /// Length of the longest suffix of `buf` that is a proper beginning of
    /// some secret: those bytes may be the first half of a value the next
    /// chunk completes.
    fn open_tail(&self, buf: &[u8]) -> usize {
        let longest = self.values.first().map_or(0, Vec::len);
        let from = buf.len().saturating_sub(longest.saturating_sub(1));
        (from..buf.len())
            .find(|&i| {
                let tail = &buf[i..];
                self.values
                    .iter()
                    .any(|v| v.len() > tail.len() && v.starts_with(tail))
            })
            .map_or(0, |i| buf.len() - i)
    }
}

/// A filter over one output stream: a secret split across two chunks is
/// still caught, because the bytes that could begin one are held back
/// until the next chunk (or the end) says.
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
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        let out = self.replace(&buf);
        let keep = self.secrets.open_tail(&out);
        let (pass, held) = out.split_at(out.len() - keep);
        self.carry = held.to_vec();
        pass.to_vec()
    }

    /// What was held back, at the end of the stream.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.carry);
        self.replace(&rest)
    }

    fn replace(&self, buf: &[u8]) -> Vec<u8> {
        let firsts: Vec<u8> = self.secrets.values.iter().map(|v| v[0]).collect();
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        while i < buf.len() {
            if firsts.contains(&buf[i]) {
                if let Some(len) = self.secrets.match_at(buf, i) {
                    out.extend_from_slice(MASK);
                    i += len;
                    continue;
                }
            }
            out.push(buf[i]);
            i += 1;
        }
        out
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
        assert_eq!(s.redact_str("x abcdefgh-less y"), "x ***-less y");
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
        assert_eq!(out, b"line one\nprefix ");
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
}
