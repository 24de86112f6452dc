use super::*;

const MINIMAL: &str = r#"
    chain = "ETHEREUM_TESTNET"
    chain_id = 11155111
    rpc_urls = ["https://rpc.example/key/SECRET"]
    confirmation = { depth = 12 }
    poll_interval_ms = 2000
    native = { symbol = "ETH", decimals = 18 }
    [[assets]]
    symbol = "USDC"
    contract_address = "0x1c7d4b196cb0c7b01d743fbc6116a902379c7238"
    decimals = 6
"#;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn every_repository_chain_file_loads_and_covers_the_chain_enum() {
    let chains = Chains::load(None).unwrap();
    for chain in Chain::ALL {
        let config = chains.get(chain).unwrap();
        assert!(!config.rpc_urls.is_empty(), "{chain}");
        assert!(config.assets.iter().any(|a| a.symbol == "USDC"), "{chain} lists USDC");
    }
    let eth = chains.get(Chain::EthereumMainnet).unwrap();
    assert_eq!(eth.chain_id, Some(1));
    let usdc = eth.assets.iter().find(|a| a.symbol == "USDC").unwrap();
    assert_eq!(usdc.contract_address, "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48");
}

#[test]
fn parses_and_normalises_a_file() {
    let c = ChainConfig::from_toml(MINIMAL, Path::new("t.toml"), &no_env).unwrap();
    assert_eq!(c.confirmation, Confirmation::Depth(12));
    assert_eq!(c.assets[0].contract_address, "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238");
    assert_eq!(c.max_block_range, 500);
    assert!(!c.traces);
    assert_eq!(c.block_reads, BlockReads::Transactions);
    let receipts = format!("block_reads = \"receipts\"\n{MINIMAL}");
    let c = ChainConfig::from_toml(&receipts, Path::new("t.toml"), &no_env).unwrap();
    assert_eq!(c.block_reads, BlockReads::Receipts);
    let logs = format!("block_reads = \"logs\"\n{MINIMAL}");
    let err = ChainConfig::from_toml(&logs, Path::new("t.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("logs") && err.contains("receipts"), "{err}");
    let (_, solana) = embedded::CHAINS.iter().find(|(name, _)| name.starts_with("solana")).unwrap();
    let solana = format!("block_reads = \"receipts\"\n{solana}");
    let err = ChainConfig::from_toml(&solana, Path::new("s.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("block_reads is for EVM chains"), "{err}");
}

#[test]
fn time_settings_take_seconds_or_their_old_unit_never_both() {
    // Lines of the file's top, and a `[transfers]` table after the rest.
    let with = |lines: &str| {
        let (top, transfers) = lines.split_once("[transfers]").unwrap_or((lines, ""));
        let mut text = MINIMAL.replace("poll_interval_ms = 2000", top);
        if !transfers.is_empty() {
            text.push_str(&format!("[transfers]{transfers}\n"));
        }
        ChainConfig::from_toml(&text, Path::new("t.toml"), &no_env)
    };
    let old = with("poll_interval_ms = 2000").unwrap();
    assert_eq!(old.poll_interval, Duration::from_secs(2));
    assert_eq!(old.stale_after, Duration::from_secs(60));
    assert_eq!(
        (old.max_lag, old.dropped_after, old.reorg_window),
        (Span::Blocks(100), Span::Blocks(64), Span::Blocks(256)),
        "the defaults count blocks"
    );
    let secs = with(
        "poll_interval_secs = 0.2\nstale_after_secs = 30\nmax_lag_secs = 300\n\
         dropped_after_secs = 600\nreorg_window_secs = 1800.5\n\
         [transfers]\nwindow_secs = 300\nrebroadcast_after_secs = 1.5\nsubmit_within_secs = 0.5",
    )
    .unwrap();
    assert_eq!(secs.poll_interval, Duration::from_millis(200));
    assert_eq!(secs.stale_after, Duration::from_secs(30));
    assert_eq!(secs.max_lag, Span::Time(Duration::from_secs(300)));
    assert_eq!(secs.dropped_after, Span::Time(Duration::from_secs(600)));
    assert_eq!(secs.reorg_window, Span::Time(Duration::from_millis(1_800_500)));
    assert_eq!(secs.transfers.rebroadcast_after(), Duration::from_millis(1500));
    assert_eq!(secs.transfers.submit_within_secs, Duration::from_millis(500));
    assert_eq!(secs.transfers.window(), Duration::from_secs(300));

    for (lines, named) in [
        ("poll_interval_ms = 2000\npoll_interval_secs = 2", "poll_interval_ms and poll_interval_secs"),
        ("poll_interval_secs = 1\nmax_lag_blocks = 5\nmax_lag_secs = 1", "max_lag_blocks and max_lag_secs"),
        (
            "poll_interval_secs = 1\nstale_after_ms = 5\nstale_after_secs = 1",
            "stale_after_ms and stale_after_secs",
        ),
        (
            "poll_interval_secs = 1\nreorg_window = 9\nreorg_window_secs = 1",
            "reorg_window and reorg_window_secs",
        ),
        (
            "poll_interval_secs = 1\ndropped_after_blocks = 9\ndropped_after_secs = 1",
            "dropped_after_blocks and dropped_after_secs",
        ),
        ("max_lag_secs = 1", "missing poll_interval_secs"),
        ("poll_interval_secs = 0", "poll_interval_secs must be a positive number of seconds"),
        ("poll_interval_secs = -0.5", "poll_interval_secs must be a positive number of seconds"),
        ("poll_interval_secs = \"1s\"", "poll_interval_secs"),
        ("poll_interval_secs = 1\n[transfers]\nwindow_secs = 0", "positive number of seconds"),
    ] {
        let err = with(lines).unwrap_err().to_string();
        assert!(err.contains(named) && err.contains("t.toml"), "{lines}: {err}");
    }
}

#[test]
fn the_base_files_describe_base_at_200_ms_blocks() {
    let chains = Chains::load(None).unwrap();
    for chain in [Chain::BaseMainnet, Chain::BaseSepolia] {
        let base = chains.get(chain).unwrap();
        assert_eq!(base.poll_interval, Duration::from_secs(1), "{chain}");
        assert_eq!(base.max_lag, Span::Time(Duration::from_secs(300)), "{chain}");
        let at_200_ms = Some(Duration::from_millis(200));
        assert_eq!(base.max_lag.blocks(at_200_ms), Some(1500), "{chain}");
        assert_eq!(base.reorg_window.blocks(at_200_ms), Some(9000), "{chain}");
        assert_eq!(base.dropped_after.blocks(at_200_ms), Some(3000), "{chain}");
    }
}

#[test]
fn environment_overrides_rpc_urls() {
    let env = |key: &str| (key == "ETHEREUM_TESTNET_RPC_URLS").then(|| "http://a:1, http://b:2".to_string());
    let c = ChainConfig::from_toml(MINIMAL, Path::new("t.toml"), &env).unwrap();
    assert_eq!(c.rpc_urls.len(), 2);
    assert_eq!(c.rpc_urls[1].expose().as_str(), "http://b:2/");
}

#[test]
fn environment_overrides_the_chain_id_and_the_genesis_hash() {
    let env = |key: &str| (key == "ETHEREUM_TESTNET_CHAIN_ID").then(|| " 31337 ".to_string());
    let c = ChainConfig::from_toml(MINIMAL, Path::new("t.toml"), &env).unwrap();
    assert_eq!(c.chain_id, Some(31337));
    assert!(c.stand_in, "a local node stands in for the chain");
    assert!(!ChainConfig::from_toml(MINIMAL, Path::new("t.toml"), &no_env).unwrap().stand_in);

    let env = |key: &str| (key == "ETHEREUM_TESTNET_CHAIN_ID").then(|| "sepolia".to_string());
    let err = ChainConfig::from_toml(MINIMAL, Path::new("t.toml"), &env).unwrap_err().to_string();
    assert!(err.contains("ETHEREUM_TESTNET_CHAIN_ID") && err.contains("sepolia"), "{err}");

    let devnet = include_str!("../../chains/solana-devnet.toml");
    let env = |key: &str| (key == "SOLANA_DEVNET_GENESIS_HASH").then(|| "LocalGenesis111".to_string());
    let c = ChainConfig::from_toml(devnet, Path::new("d.toml"), &env).unwrap();
    assert_eq!(c.genesis_hash.as_deref(), Some("LocalGenesis111"));
    assert!(c.stand_in);
}

#[test]
fn rejects_unknown_fields_and_bad_values_naming_the_file() {
    let unknown = format!("{MINIMAL}\nconfirmations = 3\n");
    let err = ChainConfig::from_toml(&unknown, Path::new("chains/x.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("chains/x.toml") && err.contains("confirmations"), "{err}");

    let bad_asset = MINIMAL.replace("0x1c7d4b196cb0c7b01d743fbc6116a902379c7238", "0x1234");
    let err = ChainConfig::from_toml(&bad_asset, Path::new("x.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("USDC"), "{err}");

    let no_id = MINIMAL.replace("chain_id = 11155111", "");
    assert!(ChainConfig::from_toml(&no_id, Path::new("x.toml"), &no_env).is_err());

    for (from, to) in [(r#"symbol = "USDC""#, r#"symbol = "US\u001fDC""#), (r#""ETH""#, r#"" ""#)] {
        let bad_symbol = MINIMAL.replace(from, to);
        let err = ChainConfig::from_toml(&bad_symbol, Path::new("x.toml"), &no_env).unwrap_err().to_string();
        assert!(err.contains("must be printable text"), "{err}");
    }
    let tether = MINIMAL.replace(r#"symbol = "USDC""#, r#"symbol = "USD₮0""#);
    assert!(ChainConfig::from_toml(&tether, Path::new("x.toml"), &no_env).is_ok());

    let b20 = format!("{MINIMAL}precompile = true\n");
    let config = ChainConfig::from_toml(&b20, Path::new("x.toml"), &no_env).unwrap();
    assert!(config.assets[0].precompile, "a B20 token at a precompile address");
    let solana = include_str!("../../chains/solana-devnet.toml").to_string() + "precompile = true\n";
    let err = ChainConfig::from_toml(&solana, Path::new("x.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("precompile is for EVM assets"), "{err}");

    let system = MINIMAL.replace("0x1c7d4b196cb0c7b01d743fbc6116a902379c7238", EIP7708_SYSTEM);
    let err = ChainConfig::from_toml(&system, Path::new("x.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("EIP-7708"), "{err}");
    let fork =
        MINIMAL.replace("poll_interval_ms = 2000", "poll_interval_ms = 2000\neip7708_from_block = 100");
    let config = ChainConfig::from_toml(&fork, Path::new("x.toml"), &no_env).unwrap();
    assert_eq!(config.eip7708_from_block, Some(100));
    let solana = format!("eip7708_from_block = 1\n{}", include_str!("../../chains/solana-devnet.toml"));
    let err = ChainConfig::from_toml(&solana, Path::new("x.toml"), &no_env).unwrap_err().to_string();
    assert!(err.contains("eip7708_from_block is for EVM chains"), "{err}");

    let secret = MINIMAL.replace("https://rpc.example/key/SECRET", "nonsense://SECRET");
    let err = ChainConfig::from_toml(&secret, Path::new("x.toml"), &no_env).unwrap_err().to_string();
    assert!(!err.contains("SECRET"), "{err}");
}
