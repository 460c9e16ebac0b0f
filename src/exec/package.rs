//! ralph's own binary as a Ray `working_dir` package: a zip holding one
//! executable `ralph`, named by its content (`_ray_pkg_<hash>.zip`, the name
//! form Ray requires), uploaded once per cluster (`PUT /api/packages/gcs/…`).
//! Nodes then need no ralph installed, and never read the coordinator's disk.
//! Deflated (miniz_oxide, pure Rust): the dashboard takes at most 100 MiB
//! per request, which a debug build of ralph alone exceeds.

/// CRC-32 (IEEE), as zip wants it.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut table = [0u32; 256];
    for (i, slot) in table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *slot = c;
    }
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc = table[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc ^ 0xFFFF_FFFF
}

/// The package's name: FNV-1a of the content and its length.
pub(crate) fn package_name(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("_ray_pkg_{h:016x}{:08x}.zip", data.len() as u32)
}

/// A zip archive with one deflated file `name`, mode 0755.
pub(crate) fn zip_one(name: &str, data: &[u8]) -> Vec<u8> {
    let crc = crc32(data);
    let size = data.len() as u32;
    // Level 1: a binary shrinks to about a third fast; more gains little.
    let packed = miniz_oxide::deflate::compress_to_vec(data, 1);
    let csize = packed.len() as u32;
    let n = name.len() as u16;
    // 1980-01-01 00:00, the zip epoch: the content names the package.
    let (time, date) = (0u16, 0x21u16);
    let mut out = Vec::with_capacity(packed.len() + 128);
    let le16 = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&x.to_le_bytes());
    let le32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    le32(&mut out, 0x0403_4b50);
    for x in [20, 0, 8, time, date] {
        le16(&mut out, x);
    }
    for x in [crc, csize, size] {
        le32(&mut out, x);
    }
    le16(&mut out, n);
    le16(&mut out, 0);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&packed);
    let cd_start = out.len() as u32;
    le32(&mut out, 0x0201_4b50);
    // Made by Unix (3), so the mode in the external attributes counts.
    for x in [(3 << 8) | 20, 20, 0, 8, time, date] {
        le16(&mut out, x);
    }
    for x in [crc, csize, size] {
        le32(&mut out, x);
    }
    for x in [n, 0, 0, 0, 0] {
        le16(&mut out, x);
    }
    le32(&mut out, 0o100_755 << 16);
    le32(&mut out, 0);
    out.extend_from_slice(name.as_bytes());
    let cd_size = out.len() as u32 - cd_start;
    le32(&mut out, 0x0605_4b50);
    for x in [0, 0, 1, 1] {
        le16(&mut out, x);
    }
    le32(&mut out, cd_size);
    le32(&mut out, cd_start);
    le16(&mut out, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_of_the_check_string() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn a_zip_python_reads_back_executable() {
        let Ok(dir) = std::env::temp_dir().canonicalize() else {
            return;
        };
        let path = dir.join(format!("ralph-zip-test-{}.zip", std::process::id()));
        std::fs::write(&path, zip_one("ralph", b"#!/bin/sh\necho hi\n")).unwrap();
        // (Deflated: method 8.)
        // Python's zipfile is what Ray unpacks with; without python3, skip.
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import sys,zipfile;z=zipfile.ZipFile(sys.argv[1]);i=z.getinfo('ralph');\
                 print(z.testzip(), oct(i.external_attr>>16), z.read('ralph').decode().strip())",
            )
            .arg(&path)
            .output();
        let _ = std::fs::remove_file(&path);
        let Ok(out) = out else { return };
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "None 0o100755 #!/bin/sh\necho hi",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn names_follow_the_content() {
        assert_ne!(package_name(b"a"), package_name(b"b"));
        assert!(package_name(b"a").starts_with("_ray_pkg_"));
        assert!(package_name(b"a").ends_with(".zip"));
    }
}
