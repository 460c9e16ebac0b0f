//! A control request to the running run, over its unix socket
//! (`paths::control_socket`): one JSON object per line each way. The
//! smallest client the page's buttons need; the steering commands' own
//! client is the one to keep when the two meet.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// How long a run has to answer (the commands answer within a second).
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// The reply of an answer that never came (or no socket to ask).
fn failed(message: String, hint: &str) -> Value {
    json!({ "ok": false, "message": message, "hint": hint })
}

/// Sends `request` (one line of JSON) to the socket at `socket` and
/// returns the run's one-line reply, or an `ok: false` reply saying why
/// there is none.
pub(crate) async fn send(socket: &Path, request: &Value) -> Value {
    let ask = async {
        let mut stream = UnixStream::connect(socket).await?;
        let mut line = request.to_string();
        line.push('\n');
        stream.write_all(line.as_bytes()).await?;
        let mut reply = String::new();
        BufReader::new(stream).read_line(&mut reply).await?;
        Ok::<String, std::io::Error>(reply)
    };
    match tokio::time::timeout(ANSWER_WITHIN, ask).await {
        Err(_) => failed(
            format!("the run did not answer within {}s", ANSWER_WITHIN.as_secs()),
            "the run may be busy or stuck; `ralph status` shows what it does",
        ),
        Ok(Err(e)) => failed(
            format!("no run answers at {}: {e}", socket.display()),
            "controls need a running `ralph run` of this project",
        ),
        Ok(Ok(reply)) => serde_json::from_str(reply.trim()).unwrap_or_else(|_| {
            failed(
                format!("the run answered {:?}, not a JSON reply", reply.trim()),
                "the run and this server may be different ralph versions",
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_out_one_line_back() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("c.sock");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::UnixListener::bind(&sock).unwrap();
            let server = tokio::spawn(async move {
                let (s, _) = listener.accept().await.unwrap();
                let (r, mut w) = s.into_split();
                let mut line = String::new();
                BufReader::new(r).read_line(&mut line).await.unwrap();
                w.write_all(b"{\"ok\":true,\"message\":\"paused\"}\n")
                    .await
                    .unwrap();
                line
            });
            let reply = send(&sock, &json!({ "cmd": "pause" })).await;
            assert_eq!(reply, json!({ "ok": true, "message": "paused" }));
            assert_eq!(server.await.unwrap(), "{\"cmd\":\"pause\"}\n");
            let none = send(&dir.path().join("none.sock"), &json!({ "cmd": "pause" })).await;
            assert_eq!(none["ok"], json!(false));
            assert!(none["hint"].as_str().unwrap().contains("ralph run"));
        });
    }
}
