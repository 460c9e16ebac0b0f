//! A small blocking HTTP/1.1 client over std `TcpStream`, enough for Ray's
//! Jobs API on the dashboard port: one request per connection
//! (`Connection: close`), JSON bodies, `Content-Length` or chunked answers.
//! A crate (reqwest, hyper) would bring a TLS stack and an async runtime of
//! its own for five JSON calls; clusters reached over the internet go
//! through a tunnel or the in-cluster address (docs/cluster.md).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_secs(120);

/// An answer: status and body.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `http://host:port` split into what a connection needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Path prefix (`/ray` behind a proxy), without a trailing slash.
    pub(crate) base: String,
}

pub(crate) fn parse_endpoint(url: &str) -> Result<Endpoint, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("{url}: only http:// is spoken (reach an https dashboard through a tunnel)")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("{url}: the port {p:?} is not a number"))?,
        ),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok(Endpoint {
        host: host.to_string(),
        port,
        base: path.to_string(),
    })
}

/// One request; `bearer` goes in `Authorization` and nowhere else.
pub(crate) fn request(
    ep: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    content_type: &str,
    bearer: Option<&str>,
) -> std::io::Result<Response> {
    let addr = (ep.host.as_str(), ep.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{}: no address", ep.host)))?;
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let body = body.unwrap_or(&[]);
    let mut head = format!(
        "{method} {}{path} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        ep.base,
        ep.host,
        ep.port,
        body.len()
    );
    if !body.is_empty() {
        head.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    if let Some(t) = bearer {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    s.flush()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse_response(&raw).map_err(std::io::Error::other)
}

/// Status line, headers, then the body as `Content-Length`, chunked
/// encoding or the connection's end say.
pub(crate) fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("the answer has no end of headers")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP answer: {status_line:?}"))?;
    let mut chunked = false;
    let mut length = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            } else if k == "content-length" {
                length = v.parse::<usize>().ok();
            }
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n)
            .ok_or("the answer is shorter than it says")?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk has no size line")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(rest.get(..size).ok_or("a chunk is cut short")?);
        rest = rest.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        let e = parse_endpoint("http://127.0.0.1:8265").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.base.as_str()),
            ("127.0.0.1", 8265, "")
        );
        let e = parse_endpoint("http://ray.internal/ray/").unwrap();
        assert_eq!((e.port, e.base.as_str()), (80, "/ray"));
        assert!(parse_endpoint("https://x").is_err());
        assert!(parse_endpoint("http://x:port").is_err());
    }

    #[test]
    fn answers_by_length_and_by_chunks() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}junk").unwrap();
        assert_eq!((r.status, r.text().as_str()), (200, "{}"));
        let r = parse_response(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.text().as_str()), (404, "abcde"));
        assert!(parse_response(b"garbage").is_err());
    }
}
