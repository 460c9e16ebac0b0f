//! Scripted model APIs on 127.0.0.1 for the real agent CLIs: the Anthropic
//! Messages API with SSE streaming (what Claude Code calls) and the OpenAI
//! Responses API with SSE (what `codex exec` calls). The CLI is real; only
//! the model on the other end is a script, which answers each request from
//! what the request says (the story in the prompt, whether a tool already
//! ran), so a run is deterministic without any clock.
//!
//! The server is std only: a listener on an ephemeral loopback port, one
//! thread per connection (HTTP/1.1 with keep-alive, bodies by
//! content-length or chunked). It never listens on any other address.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

/// One request as the script sees it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub body: Value,
    /// The body as text, for searching the prompt.
    pub text: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The story this request works on: ralph's prompt begins "... implement
    /// Story <id>: <title>", and every request of the conversation (the CLI's
    /// side calls too) carries it.
    pub fn story(&self) -> Option<String> {
        let at = self.text.find("implement Story ")? + "implement Story ".len();
        let id: String = self.text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            .collect();
        (!id.is_empty()).then_some(id)
    }
}

/// Tokens the scripted model reports for one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Uncached input.
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

impl std::ops::AddAssign for Tokens {
    fn add_assign(&mut self, o: Tokens) {
        self.input += o.input;
        self.output += o.output;
        self.cache_write += o.cache_write;
        self.cache_read += o.cache_read;
    }
}

/// The script's answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// What the answer reported as used, for the test to compare with what
    /// ralph recorded.
    pub tokens: Option<Tokens>,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            content_type: "application/json",
            body: body.to_string().into_bytes(),
            tokens: None,
        }
    }

    fn sse(body: Vec<u8>, tokens: Tokens) -> Reply {
        Reply {
            status: 200,
            headers: vec![("cache-control".into(), "no-cache".into())],
            content_type: "text/event-stream",
            body,
            tokens: Some(tokens),
        }
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// One answer given, as the test reads it back.
#[derive(Debug, Clone)]
pub struct Served {
    pub method: String,
    pub path: String,
    pub story: Option<String>,
    pub status: u16,
    pub tokens: Option<Tokens>,
}

type Script = Box<dyn FnMut(&Request) -> Reply + Send>;

/// A scripted API listening on 127.0.0.1 until dropped.
pub struct FakeApi {
    addr: SocketAddr,
    served: Arc<Mutex<Vec<Served>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl FakeApi {
    /// Starts a server that answers every request with `script`. The script
    /// runs under a lock (one request at a time), so it may keep counters.
    pub fn start(script: impl FnMut(&Request) -> Reply + Send + 'static) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Box::new(script)));
        let accept = {
            let (served, stop) = (served.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (served, script) = (served.clone(), script.clone());
                    std::thread::spawn(move || serve(conn, &script, &served));
                }
            })
        };
        FakeApi {
            addr,
            served,
            stop,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn served(&self) -> Vec<Served> {
        self.served.lock().unwrap().clone()
    }

    /// The tokens reported in the answers about `story`.
    pub fn tokens_for(&self, story: &str) -> Tokens {
        let mut t = Tokens::default();
        for s in self.served() {
            if s.story.as_deref() == Some(story) {
                if let Some(x) = s.tokens {
                    t += x;
                }
            }
        }
        t
    }

    /// How many answers about `story` had this status.
    pub fn count(&self, story: &str, status: u16) -> usize {
        self.served()
            .iter()
            .filter(|s| s.story.as_deref() == Some(story) && s.status == status)
            .count()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Answers the requests of one connection until the client closes it.
fn serve(conn: TcpStream, script: &Mutex<Script>, served: &Mutex<Vec<Served>>) {
    // A client that went silent must not keep this thread forever.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(120)));
    let mut writer = match conn.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(conn);
    while let Some(req) = read_request(&mut reader) {
        let reply = {
            let mut script = script.lock().unwrap_or_else(|e| e.into_inner());
            (script)(&req)
        };
        served.lock().unwrap().push(Served {
            method: req.method.clone(),
            path: req.path.clone(),
            story: req.story(),
            status: reply.status,
            tokens: reply.tokens,
        });
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nrequest-id: req_fake\r\n",
            reply.status,
            reason(reply.status),
            reply.content_type,
            reply.body.len()
        );
        for (k, v) in &reply.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        // A HEAD answer has a length but no body.
        let body: &[u8] = if req.method == "HEAD" {
            &[]
        } else {
            &reply.body
        };
        if writer.write_all(head.as_bytes()).is_err()
            || writer.write_all(body).is_err()
            || writer.flush().is_err()
        {
            return;
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// One HTTP/1.1 request, or `None` at the end of the connection.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        r.read_exact(&mut body).ok()?;
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Some(Request {
        method,
        path,
        headers,
        body,
        text,
    })
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The shell command the scripted model has the CLI run for a story: a
/// file of its own, committed on the story's branch.
pub fn story_command(id: &str) -> String {
    format!(
        "printf 'story {id}\\n' > story-{id}.txt && git add story-{id}.txt && \
         git commit -q -m 'feat(story-{id}): story-{id}.txt'"
    )
}

/// The Anthropic Messages API (`POST /v1/messages`, SSE).
pub mod anthropic {
    use super::*;

    /// Every answer reports these tokens, so a story's totals are a
    /// multiple of them.
    pub const TOKENS: Tokens = Tokens {
        input: 1200,
        output: 40,
        cache_write: 300,
        cache_read: 5000,
    };

    /// A request of the agent's main loop (it offers tools); Claude Code
    /// also makes side calls without tools (a title for the session).
    pub fn is_turn(req: &Request) -> bool {
        req.body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
    }

    /// The last message carries a tool's result: the tool already ran.
    pub fn after_tool(req: &Request) -> bool {
        req.body
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|m| m.last())
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    }

    fn model(req: &Request) -> String {
        req.body["model"]
            .as_str()
            .unwrap_or("claude-sonnet-4-5")
            .to_string()
    }

    fn start(req: &Request, t: Tokens) -> String {
        event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model(req),
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": t.input, "output_tokens": 1,
                          "cache_creation_input_tokens": t.cache_write,
                          "cache_read_input_tokens": t.cache_read}}}),
        )
    }

    fn end(stop: &str, t: Tokens) -> String {
        event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": t.output}}),
        ) + &event("message_stop", &json!({"type": "message_stop"}))
    }

    fn text_block(index: u64, text: &str) -> String {
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
        ) + &event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": text}}),
        ) + &event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        )
    }

    /// A final answer: `text`, then the turn ends.
    pub fn text(req: &Request, text: &str) -> Reply {
        let body = start(req, TOKENS) + &text_block(0, text) + &end("end_turn", TOKENS);
        Reply::sse(body.into_bytes(), TOKENS)
    }

    /// The model asks the CLI to run `command` with its Bash tool.
    pub fn bash(req: &Request, command: &str) -> Reply {
        let input = json!({"command": command, "description": "commit the story"}).to_string();
        let (a, b) = input.split_at(input.len() / 2);
        let body = start(req, TOKENS)
            + &text_block(0, "I'll write and commit the file.")
            + &event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 1, "content_block":
                        {"type": "tool_use", "id": "toolu_fake01", "name": "Bash", "input": {}}}),
            )
            + &event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": a}}),
            )
            + &event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": b}}),
            )
            + &event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 1}),
            )
            + &end("tool_use", TOKENS);
        Reply::sse(body.into_bytes(), TOKENS)
    }

    /// A model that does its story: commits a file with the Bash tool, then
    /// says DONE. Side calls get a short text.
    pub fn work(req: &Request) -> Reply {
        if req.method != "POST" {
            return Reply::json(
                404,
                json!({"type": "error", "error": {"type": "not_found_error", "message": "not here"}}),
            );
        }
        if req.path.contains("count_tokens") {
            return Reply::json(200, json!({"input_tokens": 100}));
        }
        let Some(id) = req.story() else {
            return text(req, "ok");
        };
        if req.body["stream"] != true {
            return Reply::json(
                200,
                json!({"id": "msg_fake", "type": "message", "role": "assistant",
                "model": model(req), "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 2}}),
            );
        }
        if !is_turn(req) {
            return text(req, &format!("Story {id}"));
        }
        if after_tool(req) {
            text(
                req,
                &format!("Committed story-{id}.txt.\n<ralph>DONE {id}</ralph>"),
            )
        } else {
            bash(req, &story_command(id.as_str()))
        }
    }

    /// An API-key rate limit: a plain 429 that the CLI retries itself
    /// after `retry-after` seconds.
    pub fn too_many_requests(retry_after_secs: u64) -> Reply {
        Reply::json(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
        )
        .with_header("retry-after", retry_after_secs.to_string())
    }

    /// The API is overloaded (529), which the CLI retries like a 429.
    pub fn overloaded() -> Reply {
        Reply::json(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    }

    /// A subscription's usage limit: a 429 whose unified rate-limit headers
    /// say the five-hour window is spent until `resets_at` (Unix seconds).
    pub fn usage_limit(resets_at: u64) -> Reply {
        Reply::json(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}),
        )
        .with_header("anthropic-ratelimit-unified-status", "rejected")
        .with_header("anthropic-ratelimit-unified-reset", resets_at.to_string())
        .with_header("anthropic-ratelimit-unified-representative-claim", "five_hour")
        .with_header("anthropic-ratelimit-unified-5h-status", "rejected")
        .with_header("anthropic-ratelimit-unified-5h-reset", resets_at.to_string())
        .with_header("anthropic-ratelimit-unified-5h-utilization", "1.0")
    }
}

/// The OpenAI Responses API (`POST /v1/responses`, SSE).
pub mod openai {
    use super::*;

    /// Every answer reports these tokens. `input_tokens` in the API
    /// includes the cached ones: `TOKENS.input` is the uncached part.
    pub const TOKENS: Tokens = Tokens {
        input: 500,
        output: 60,
        cache_write: 0,
        cache_read: 1500,
    };

    fn usage() -> Value {
        json!({"input_tokens": TOKENS.input + TOKENS.cache_read,
               "input_tokens_details": {"cached_tokens": TOKENS.cache_read},
               "output_tokens": TOKENS.output,
               "output_tokens_details": {"reasoning_tokens": 20},
               "total_tokens": TOKENS.input + TOKENS.cache_read + TOKENS.output})
    }

    fn ev(v: Value) -> String {
        let name = v["type"].as_str().unwrap_or("message").to_string();
        event(&name, &v)
    }

    /// The input already holds a tool's output: the tool ran.
    pub fn after_tool(req: &Request) -> bool {
        req.body["input"].as_array().is_some_and(|items| {
            items.iter().any(|i| {
                matches!(
                    i["type"].as_str(),
                    Some("function_call_output" | "custom_tool_call_output")
                )
            })
        })
    }

    fn tools(req: &Request) -> Vec<String> {
        req.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().or(t["type"].as_str()))
            .map(str::to_string)
            .collect()
    }

    fn response(items: Vec<Value>) -> Reply {
        let mut body = ev(json!({"type": "response.created", "response": {"id": "resp_fake"}}));
        for (i, item) in items.into_iter().enumerate() {
            body +=
                &ev(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
        }
        body += &ev(
            json!({"type": "response.completed", "response": {"id": "resp_fake", "usage": usage()}}),
        );
        Reply::sse(body.into_bytes(), TOKENS)
    }

    /// A final answer.
    pub fn text(text: &str) -> Reply {
        response(vec![
            json!({"type": "message", "id": "msg_1", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
        ])
    }

    /// The model asks Codex to run `command` with whichever shell tool this
    /// version offers.
    pub fn shell(req: &Request, command: &str) -> Reply {
        let tools = tools(req);
        let (name, args) = if tools.iter().any(|t| t == "exec_command") {
            ("exec_command", json!({"cmd": command}))
        } else if tools.iter().any(|t| t == "shell_command") {
            ("shell_command", json!({"command": command}))
        } else {
            ("shell", json!({"command": ["bash", "-lc", command]}))
        };
        response(vec![
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_fake1",
            "name": name, "arguments": args.to_string(), "status": "completed"}),
        ])
    }

    /// A model that does its story: commits a file with the shell tool,
    /// then says DONE.
    pub fn work(req: &Request) -> Reply {
        if req.method == "GET" && req.path.ends_with("/models") {
            return Reply::json(200, json!({"object": "list", "data": []}));
        }
        if req.method != "POST" || !req.path.ends_with("/responses") {
            return Reply::json(404, json!({"error": {"message": "not here"}}));
        }
        let Some(id) = req.story() else {
            return text("ok");
        };
        if after_tool(req) {
            text(&format!(
                "Committed story-{id}.txt.\n<ralph>DONE {id}</ralph>"
            ))
        } else {
            shell(req, &story_command(&id))
        }
    }

    /// A per-minute rate limit, retried by Codex.
    pub fn too_many_requests() -> Reply {
        Reply::json(
            429,
            json!({"error": {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded",
            "message": "Rate limit reached for requests per min. Please try again in 0s."}}),
        )
        .with_header("retry-after", "0")
    }

    /// A ChatGPT plan's usage limit, until `resets_at` (Unix seconds).
    pub fn usage_limit(resets_at: u64, now: u64) -> Reply {
        Reply::json(
            429,
            json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
                "plan_type": "plus", "resets_at": resets_at,
                "resets_in_seconds": resets_at.saturating_sub(now)}}),
        )
    }
}
