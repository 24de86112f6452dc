//! Overwrites a secret variable's value in the process's own environment
//! block once it is read. Removing a variable (`remove_var`) only drops the
//! C library's pointer to it: the original bytes stay where the kernel put
//! them at `exec`, and anyone allowed to read `/proc/<pid>/environ` (the
//! same user, root, a crash reporter, a support bundle) reads them there.
//! The block lies between `env_start` and `env_end` of `/proc/self/stat`,
//! and a process may write its own memory through `/proc/self/mem`: the
//! value's bytes are zeroed in place, so the variable reads as empty from
//! then on, in this process and in the environment its children inherit.

use std::{
    fs::OpenOptions,
    io::{Read, Seek, SeekFrom, Write},
};

/// Zeroes the value of every `name=` entry of the environment block;
/// whether one was found.
pub fn scrub(name: &str) -> std::io::Result<bool> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let (start, end) = environ_range(&stat)
        .ok_or_else(|| std::io::Error::other("/proc/self/stat names no environment block"))?;
    let mut mem = OpenOptions::new().read(true).write(true).open("/proc/self/mem")?;
    let mut block = vec![0u8; (end - start) as usize];
    mem.seek(SeekFrom::Start(start))?;
    mem.read_exact(&mut block)?;
    let values = values_of(&block, name);
    for (offset, len) in &values {
        mem.seek(SeekFrom::Start(start + *offset as u64))?;
        mem.write_all(&vec![0u8; *len])?;
    }
    Ok(!values.is_empty())
}

/// `env_start` and `env_end`, fields 50 and 51 of `/proc/<pid>/stat`
/// (counted after the command name, which may hold spaces and parentheses).
fn environ_range(stat: &str) -> Option<(u64, u64)> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    // The first field after the name is field 3.
    let start = fields.get(50 - 3)?.parse().ok()?;
    let end = fields.get(51 - 3)?.parse().ok()?;
    (end > start).then_some((start, end))
}

/// Where the values of `name=` entries lie in `block` (NUL-separated
/// `NAME=value` entries): `(offset, length)`, empty values left out.
fn values_of(block: &[u8], name: &str) -> Vec<(usize, usize)> {
    let prefix = format!("{name}=");
    let mut offset = 0;
    let mut found = Vec::new();
    for entry in block.split(|b| *b == 0) {
        if entry.starts_with(prefix.as_bytes()) && entry.len() > prefix.len() {
            found.push((offset + prefix.len(), entry.len() - prefix.len()));
        }
        offset += entry.len() + 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_block_and_the_values_to_zero() {
        // A real line's shape: the name holds a space and a parenthesis.
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[50 - 3] = "140737488347000".into();
        fields[51 - 3] = "140737488350000".into();
        let stat = format!("4242 (custody (x) i) {}", fields.join(" "));
        assert_eq!(environ_range(&stat), Some((140_737_488_347_000, 140_737_488_350_000)));
        assert_eq!(environ_range("4242 (short) S 1 2"), None);

        let block = b"HOME=/root\0SECRET=abc def\0SECRETS=x\0SECRET=\0PATH=/bin\0";
        assert_eq!(values_of(block, "SECRET"), vec![(18, 7)]);
        assert_eq!(&block[18..25], b"abc def");
        assert!(values_of(block, "NONE").is_empty());
    }

    #[test]
    fn the_own_environment_block_is_readable() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (start, end) = environ_range(&stat).unwrap();
        assert!(end > start);
    }
}
