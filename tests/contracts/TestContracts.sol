// SPDX-License-Identifier: Apache-2.0
// Contracts the integration tests deploy on anvil. Rebuild the artifacts in
// build/ with scripts/build-contracts.sh after changing this file.
pragma solidity 0.8.30;

/// A minimal ERC-20 whose balances the tests mint freely.
contract TestToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    string public name;
    string public symbol;
    uint8 public decimals;
    mapping(address => uint256) public balanceOf;

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function mint(address to, uint256 value) external {
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function transfer(address to, uint256 value) external virtual returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    /// Several Transfer logs in one transaction.
    function batchTransfer(address[] calldata to, uint256[] calldata value) external {
        require(to.length == value.length, "length");
        for (uint256 i = 0; i < to.length; i++) {
            _move(msg.sender, to[i], value[i]);
        }
    }

    /// Emits a Transfer and then reverts, so the log never lands on chain.
    function transferThenRevert(address to, uint256 value) external {
        _move(msg.sender, to, value);
        revert("reverted on purpose");
    }

    function _move(address from, address to, uint256 value) internal {
        require(balanceOf[from] >= value, "balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}

/// A TestToken whose `transfer` also burns `burn` gas: a call that can
/// need more gas than one transaction may carry since EIP-7825.
contract HeavyToken is TestToken {
    uint256 public burn;

    constructor(string memory name_, string memory symbol_, uint8 decimals_)
        TestToken(name_, symbol_, decimals_)
    {}

    function setBurn(uint256 gas) external {
        burn = gas;
    }

    function transfer(address to, uint256 value) external override returns (bool) {
        uint256 start = gasleft();
        while (start - gasleft() < burn) {}
        _move(msg.sender, to, value);
        return true;
    }
}

/// A TestToken with EIP-3009 `transferWithAuthorization`, verified as USDC
/// verifies it (EIP-712 domain version "2").
contract TestAuthToken is TestToken {
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public immutable DOMAIN_SEPARATOR;
    mapping(address => mapping(bytes32 => bool)) public authorizationState;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) TestToken(name_, symbol_, decimals_) {
        DOMAIN_SEPARATOR = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256(bytes(name_)),
                keccak256(bytes("2")),
                block.chainid,
                address(this)
            )
        );
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        require(block.timestamp > validAfter, "authorization is not yet valid");
        require(block.timestamp < validBefore, "authorization is expired");
        require(!authorizationState[from][nonce], "authorization is used");
        bytes32 structHash = keccak256(
            abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce)
        );
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR, structHash));
        require(ecrecover(digest, v, r, s) == from, "invalid signature");
        authorizationState[from][nonce] = true;
        emit AuthorizationUsed(from, nonce);
        _move(from, to, value);
    }
}

/// Sends native currency from inside a contract: an internal transfer that only
/// a trace shows.
contract Forwarder {
    function forward(address payable to) external payable {
        (bool ok, ) = to.call{value: msg.value}("");
        require(ok, "forward failed");
    }

    function forwardThenRevert(address payable to) external payable {
        (bool ok, ) = to.call{value: msg.value}("");
        require(ok, "forward failed");
        revert("reverted on purpose");
    }

    receive() external payable {
        revert("refused");
    }
}

/// The reads of Multicall3 that the reconciliation makes (`aggregate3`,
/// `getEthBalance`), with the same ABI and behaviour as the contract at
/// 0xcA11bde05977b3631167028862bE2a173976CA11 on the chains the platform
/// watches: placed at that address on anvil, which has none.
contract Multicall3Reads {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; i++) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            require(success || calls[i].allowFailure, "Multicall3: call failed");
            returnData[i] = Result(success, data);
        }
    }

    function getEthBalance(address addr) external view returns (uint256 balance) {
        balance = addr.balance;
    }
}
