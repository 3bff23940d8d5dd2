// tablesense signage: every player-facing text of the page in English, Simplified Chinese and Traditional
// Chinese. Keys are the display model's language-neutral keys (phases, positions, wager names, settlement
// categories; docs/signage.md). "{name}" is replaced by the value given. Plain JavaScript, no third-party code.
"use strict";

const LANGUAGES = ["en", "zh-Hans", "zh-Hant"];

const I18N = {
  en: {
    connecting: "Connecting…",
    feed_offline: "Feed offline — reconnecting…",
    table_closed: "Table closed",
    shoe_round: "Shoe {shoe} · Round {round}",
    hand: "Hand {n}",
    round_n: "Round {n}",
    on_hold: "on hold",
    wins: "{who} wins {hi} – {lo}",
    tie_result: "Tie {p} – {b}",
    natural: "Natural",
    void: "Round void",
    face_down: "Cards are dealt face down — shown at the reveal",
    no_pair: "No pair",
    no_win: "No win",
    returned: "Wager returned",
    odds_limits: "Odds · Limits",
    waiting: "Waiting for the table…",
    box: "Box {n}",
    seat: "Seat {n}",
    odds: "{pays} to {per}",
    push: "push",
    commission: "less {rate} commission,",
    bead: { banker: "B", player: "P", tie: "T" },
    position: { player: "Player", banker: "Banker", dealer: "Dealer", board: "Board" },
    phase: { betting: "Place your bets", dealing: "Dealing", playing: "Playing", reveal: "Awaiting reveal",
             complete: "Round complete", burn: "Burn", shoe_end: "Shoe ends" },
    game: { baccarat: "Baccarat", "ez-baccarat": "EZ Baccarat", blackjack: "Blackjack",
            uth: "Ultimate Texas Hold 'Em" },
    bet: { player: "Player", banker: "Banker", tie: "Tie", perfect_pairs: "Perfect Pairs",
           dragon_bonus: "Dragon Bonus", house_money: "House Money", dragon_7: "Dragon 7", panda_8: "Panda 8",
           blackjack: "Blackjack", ante: "Ante", ultimate_pairs: "Ultimate Pairs" },
    category: {
      player_win: "Player wins", banker_win: "Banker wins", tie: "Tie",
      banker_dragon_7: "Banker three-card 7", perfect_pair: "Perfect Pair", colored_pair: "Colored Pair",
      mixed_pair: "Mixed Pair", pair: "Pair", natural_win: "Natural wins", natural_tie: "Natural tie",
      win_by_9: "Wins by 9", win_by_8: "Wins by 8", win_by_7: "Wins by 7", win_by_6: "Wins by 6",
      win_by_5: "Wins by 5", win_by_4: "Wins by 4", one_pair: "One hand paired", both_pairs: "Both hands paired",
      dragon_7: "Banker three-card 7", panda_8: "Player three-card 8",
      aces_with_dealer_aces: "A-A with dealer A-A", red_aces: "Red aces A♥ A♦", aces: "A-A",
      ace_king_suited: "A-K suited", ace_queen_or_jack_suited: "A-Q or A-J suited", ace_king: "A-K",
      face_pair: "K-K, Q-Q or J-J", ace_queen_or_jack: "A-Q or A-J", low_pair: "Pair 2s–10s" },
    rounding: { up: "rounded up to {unit}", down: "rounded down to {unit}",
                half_up: "rounded to the nearest {unit}", half_even: "rounded to the nearest {unit}, halves to even" },
    void_reason: { "void button": "voided by the dealer", "voided by the floor": "voided by the floor",
                   "new shoe mid-round": "new shoe mid-round", misdeal: "misdeal" },
    road: { bead_plate: "Bead Plate", big_road: "Big Road", big_eye_boy: "Big Eye Boy", small_road: "Small Road",
            cockroach_pig: "Cockroach Pig" },
    stat: { banker: "Banker", player: "Player", tie: "Tie", player_pair: "Player pair", banker_pair: "Banker pair",
            naturals: "Naturals", rounds: "Rounds", cards_remaining: "Cards left" },
    legend: { banker_pair: "Banker pair", player_pair: "Player pair", natural: "Natural" },
  },
  "zh-Hans": {
    connecting: "正在连接…",
    feed_offline: "信号中断，正在重新连接…",
    table_closed: "本桌已关闭",
    shoe_round: "第{shoe}靴 · 第{round}局",
    hand: "第{n}局",
    round_n: "第{n}局",
    on_hold: "暂停",
    wins: "{who}赢 {hi} – {lo}",
    tie_result: "和局 {p} – {b}",
    natural: "例牌",
    void: "本局作废",
    face_down: "牌面朝下，开牌时显示",
    no_pair: "无对子",
    no_win: "未中奖",
    returned: "退还注码",
    odds_limits: "赔率 · 限红",
    waiting: "等待牌桌信息…",
    box: "{n}号位",
    seat: "{n}号位",
    odds: "{per}赔{pays}",
    push: "退还本金",
    commission: "庄赢抽佣{rate}，",
    bead: { banker: "庄", player: "闲", tie: "和" },
    position: { player: "闲", banker: "庄", dealer: "庄家", board: "公共牌" },
    phase: { betting: "请下注", dealing: "发牌中", playing: "进行中", reveal: "等待开牌", complete: "本局结束",
             burn: "烧牌", shoe_end: "本靴结束" },
    game: { baccarat: "百家乐", "ez-baccarat": "免佣百家乐", blackjack: "二十一点", uth: "终极德州扑克" },
    bet: { player: "闲", banker: "庄", tie: "和", perfect_pairs: "完美对子", dragon_bonus: "龙宝",
           house_money: "任意对子", dragon_7: "龙7", panda_8: "熊猫8", blackjack: "二十一点", ante: "底注",
           ultimate_pairs: "终极对子" },
    category: {
      player_win: "闲赢", banker_win: "庄赢", tie: "和局", banker_dragon_7: "庄三张牌7点",
      perfect_pair: "完美对子", colored_pair: "同色对子", mixed_pair: "混色对子", pair: "对子",
      natural_win: "例牌赢", natural_tie: "例牌和局",
      win_by_9: "赢9点", win_by_8: "赢8点", win_by_7: "赢7点", win_by_6: "赢6点", win_by_5: "赢5点",
      win_by_4: "赢4点", one_pair: "一方对子", both_pairs: "双方对子",
      dragon_7: "庄三张牌7点", panda_8: "闲三张牌8点",
      aces_with_dealer_aces: "AA及庄家AA", red_aces: "红色AA", aces: "AA", ace_king_suited: "同花AK",
      ace_queen_or_jack_suited: "同花AQ/AJ", ace_king: "AK", face_pair: "KK/QQ/JJ", ace_queen_or_jack: "AQ/AJ",
      low_pair: "对子2至10" },
    rounding: { up: "向上取整至{unit}", down: "向下取整至{unit}", half_up: "四舍五入至{unit}",
                half_even: "银行家舍入至{unit}" },
    void_reason: { "void button": "荷官作废", "voided by the floor": "主管作废", "new shoe mid-round": "中途换靴",
                   misdeal: "发牌错误" },
    road: { bead_plate: "珠盘路", big_road: "大路", big_eye_boy: "大眼仔", small_road: "小路",
            cockroach_pig: "蟑螂路" },
    stat: { banker: "庄", player: "闲", tie: "和", player_pair: "闲对", banker_pair: "庄对", naturals: "例牌",
            rounds: "局数", cards_remaining: "余牌" },
    legend: { banker_pair: "庄对", player_pair: "闲对", natural: "例牌" },
  },
  "zh-Hant": {
    connecting: "正在連接…",
    feed_offline: "訊號中斷，正在重新連接…",
    table_closed: "本桌已關閉",
    shoe_round: "第{shoe}靴 · 第{round}局",
    hand: "第{n}局",
    round_n: "第{n}局",
    on_hold: "暫停",
    wins: "{who}贏 {hi} – {lo}",
    tie_result: "和局 {p} – {b}",
    natural: "例牌",
    void: "本局作廢",
    face_down: "牌面朝下，開牌時顯示",
    no_pair: "無對子",
    no_win: "未中獎",
    returned: "退還注碼",
    odds_limits: "賠率 · 限紅",
    waiting: "等待牌桌資訊…",
    box: "{n}號位",
    seat: "{n}號位",
    odds: "{per}賠{pays}",
    push: "退還本金",
    commission: "莊贏抽佣{rate}，",
    bead: { banker: "莊", player: "閒", tie: "和" },
    position: { player: "閒", banker: "莊", dealer: "莊家", board: "公共牌" },
    phase: { betting: "請下注", dealing: "發牌中", playing: "進行中", reveal: "等待開牌", complete: "本局結束",
             burn: "燒牌", shoe_end: "本靴結束" },
    game: { baccarat: "百家樂", "ez-baccarat": "免佣百家樂", blackjack: "二十一點", uth: "終極德州撲克" },
    bet: { player: "閒", banker: "莊", tie: "和", perfect_pairs: "完美對子", dragon_bonus: "龍寶",
           house_money: "任意對子", dragon_7: "龍7", panda_8: "熊貓8", blackjack: "二十一點", ante: "底注",
           ultimate_pairs: "終極對子" },
    category: {
      player_win: "閒贏", banker_win: "莊贏", tie: "和局", banker_dragon_7: "莊三張牌7點",
      perfect_pair: "完美對子", colored_pair: "同色對子", mixed_pair: "混色對子", pair: "對子",
      natural_win: "例牌贏", natural_tie: "例牌和局",
      win_by_9: "贏9點", win_by_8: "贏8點", win_by_7: "贏7點", win_by_6: "贏6點", win_by_5: "贏5點",
      win_by_4: "贏4點", one_pair: "一方對子", both_pairs: "雙方對子",
      dragon_7: "莊三張牌7點", panda_8: "閒三張牌8點",
      aces_with_dealer_aces: "AA及莊家AA", red_aces: "紅色AA", aces: "AA", ace_king_suited: "同花AK",
      ace_queen_or_jack_suited: "同花AQ/AJ", ace_king: "AK", face_pair: "KK/QQ/JJ", ace_queen_or_jack: "AQ/AJ",
      low_pair: "對子2至10" },
    rounding: { up: "向上取整至{unit}", down: "向下取整至{unit}", half_up: "四捨五入至{unit}",
                half_even: "銀行家捨入至{unit}" },
    void_reason: { "void button": "荷官作廢", "voided by the floor": "主管作廢", "new shoe mid-round": "中途換靴",
                   misdeal: "發牌錯誤" },
    road: { bead_plate: "珠盤路", big_road: "大路", big_eye_boy: "大眼仔", small_road: "小路",
            cockroach_pig: "曱甴路" },
    stat: { banker: "莊", player: "閒", tie: "和", player_pair: "閒對", banker_pair: "莊對", naturals: "例牌",
            rounds: "局數", cards_remaining: "餘牌" },
    legend: { banker_pair: "莊對", player_pair: "閒對", natural: "例牌" },
  },
};

/** The language tag for a requested one: "en", "zh-Hans", "zh-Hant" (also zh-CN/zh-SG -> zh-Hans,
 * zh-TW/zh-HK/zh-MO -> zh-Hant, case-insensitive), else null. */
function normaliseLanguage(tag) {
  if (!tag) return null;
  const t = String(tag).trim().toLowerCase();
  if (t === "en" || t.startsWith("en-")) return "en";
  if (["zh-hans", "zh-cn", "zh-sg", "zh"].includes(t)) return "zh-Hans";
  if (["zh-hant", "zh-tw", "zh-hk", "zh-mo"].includes(t)) return "zh-Hant";
  return null;
}

/** Text ``key`` (a dotted path such as "phase.betting") in ``lang``, "{name}" replaced from ``vars``;
 * falls back to English, then to ``fallback`` (e.g. the message's own English label). */
function tr(lang, key, vars, fallback) {
  const look = (table) => key.split(".").reduce((node, k) => (node && typeof node === "object" ? node[k] : undefined), table);
  let text = look(I18N[lang] || I18N.en);
  if (typeof text !== "string") text = look(I18N.en);
  if (typeof text !== "string") text = fallback !== undefined && fallback !== null ? String(fallback) : key;
  for (const [k, v] of Object.entries(vars || {})) text = text.split(`{${k}}`).join(String(v));
  return text;
}

/** Odds text ("25 to 1", "3 to 2", "push") in ``lang``: "25 to 1", "1赔25", "1賠25". */
function oddsText(lang, odds) {
  if (odds === null || odds === undefined) return "";
  const s = String(odds).trim();
  if (s === "push") return tr(lang, "push");
  const m = /^(\d+)\s+to\s+(\d+)$/.exec(s);
  return m ? tr(lang, "odds", { pays: m[1], per: m[2] }) : s;
}
