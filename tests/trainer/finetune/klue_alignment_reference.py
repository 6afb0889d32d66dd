# ruff: noqa
"""KLUE-baseline's own NER alignment and RE marking, copied from

    https://github.com/KLUE-benchmark/KLUE-baseline
    commit 8a03c9447e4c225e806877a84242aea11258c790
    klue_baseline/data/klue_ner.py (KlueNERProcessor._create_examples),
    klue_baseline/models/named_entity_recognition.py (NERTransformer.validation_epoch_end,
    tokenizer_out_aligner) and klue_baseline/data/klue_re.py (_mark_entity_spans,
    fix_tokenization_error)

with the methods made functions of their inputs (`self.tokenizer`, `self.hparams` and the
Lightning plumbing become arguments; the lines that align are as they are). Copyright the
KLUE-baseline authors, Apache License 2.0. test_klue_ner.py and test_klue_re.py run them
beside trainer/finetune/klue_ner.py and klue_re.py on the same sentences and predictions."""

from typing import List

IN_UNK_TOKEN = "[+UNK]"


def create_example_labels(tokenizer, doc: str, strip_char: str = "##"):
    """One raw sentence block of the file -> (sentence, subword labels, clean char labels)."""
    original_clean_tokens = []  # clean tokens (bert clean func)
    original_clean_labels = []  # clean labels (bert clean func)
    sentence = ""
    for line in doc.split("\n"):
        if line[:2] == "##":
            guid = line.split("\t")[0].replace("##", "")
            continue
        token, tag = line.split("\t")
        sentence += token
        if token == " ":
            continue
        original_clean_tokens.append(token)
        original_clean_labels.append(tag)
    # sentence: "안녕 하세요.."
    # original_clean_labels: [안, 녕, 하, 세, 요, ., .]
    sent_words = sentence.split(" ")
    # sent_words: [안녕, 하세요..]
    modi_labels = []
    char_idx = 0
    for word in sent_words:
        # 안녕, 하세요
        correct_syllable_num = len(word)
        tokenized_word = tokenizer.tokenize(word)
        # case1: 음절 tokenizer --> [안, ##녕]
        # case2: wp tokenizer --> [안녕]
        # case3: 음절, wp tokenizer에서 unk --> [unk]
        # unk규칙 --> 어절이 통채로 unk로 변환, 단, 기호는 분리
        contain_unk = True if tokenizer.unk_token in tokenized_word else False
        for i, token in enumerate(tokenized_word):
            token = token.replace(strip_char, "")
            if not token:
                modi_labels.append("O")
                continue
            modi_labels.append(original_clean_labels[char_idx])
            if not contain_unk:
                char_idx += len(token)
        if contain_unk:
            char_idx += correct_syllable_num
    return sentence, modi_labels, original_clean_labels


def tokenizer_out_aligner(
    tokenizer, t_in: str, t_out: List[str], strip_char: str = "##"
) -> List[str]:
    t_out_new = []
    i, j = 0, 0
    UNK_flag = False
    while True:
        if i == len(t_in) and j == len(t_out) - 1:
            break
        step_t_out = len(t_out[j].replace(strip_char, "")) if t_out[j] != tokenizer.unk_token else 1
        if UNK_flag:
            t_out_new.append(IN_UNK_TOKEN)
        else:
            t_out_new.append(t_out[j])
        if (
            j < len(t_out) - 1
            and t_out[j] == tokenizer.unk_token
            and t_out[j + 1] != tokenizer.unk_token
        ):
            i += step_t_out
            UNK_flag = True
            if t_in[i] == t_out[j + 1][0]:
                j += 1
                UNK_flag = False
        else:
            i += step_t_out
            j += 1
        if j == len(t_out):
            UNK_flag = True
            j -= 1
    return t_out_new


def character_preds(tokenizer, subword_preds, example, label_list, max_seq_length, strip_char="##"):
    """One sentence's piece predictions (a list of ints over max_seq_length positions) ->
    (character predictions, original labels), as validation_epoch_end builds them."""
    original_sentence = example["original_sentence"]  # 안녕 하세요 ^^
    character_preds = [subword_preds[0]]  # [CLS]
    character_preds_idx = 1
    for word in original_sentence.split(" "):  # ['안녕', '하세요', '^^']
        if character_preds_idx >= max_seq_length - 1:
            break
        subwords = tokenizer.tokenize(
            word
        )  # 안녕 -> [안, ##녕] / 하세요 -> [하, ##세요] / ^^ -> [UNK]
        if tokenizer.unk_token in subwords:  # 뻥튀기가 필요한 case!
            unk_aligned_subwords = tokenizer_out_aligner(
                tokenizer, word, subwords, strip_char
            )  # [UNK] -> [UNK, +UNK]
            unk_flag = False
            for subword in unk_aligned_subwords:
                if character_preds_idx >= max_seq_length - 1:
                    break
                subword_pred = subword_preds[character_preds_idx]
                subword_pred_label = label_list[subword_pred]
                if subword == tokenizer.unk_token:
                    unk_flag = True
                    character_preds.append(subword_pred)
                    continue
                elif subword == IN_UNK_TOKEN:
                    if subword_pred_label == "O":
                        character_preds.append(subword_pred)
                    else:
                        _, entity_category = subword_pred_label.split("-")
                        character_pred_label = "I-" + entity_category
                        character_pred = label_list.index(character_pred_label)
                        character_preds.append(character_pred)
                    continue
                else:
                    if unk_flag:
                        character_preds_idx += 1
                        subword_pred = subword_preds[character_preds_idx]
                        character_preds.append(subword_pred)
                        unk_flag = False
                    else:
                        character_preds.append(subword_pred)
                        character_preds_idx += (
                            1  # `+UNK`가 끝나는 시점에서도 += 1 을 해줘야 다음 label로 넘어감
                        )
        else:
            for subword in subwords:
                if character_preds_idx >= max_seq_length - 1:
                    break
                subword = subword.replace(strip_char, "")  # xlm roberta: "▁" / others "##"
                subword_pred = subword_preds[character_preds_idx]
                subword_pred_label = label_list[subword_pred]
                for i in range(0, len(subword)):  # 안, 녕
                    if i == 0:
                        character_preds.append(subword_pred)
                    else:
                        if subword_pred_label == "O":
                            character_preds.append(subword_pred)
                        else:
                            _, entity_category = subword_pred_label.split("-")
                            character_pred_label = "I-" + entity_category
                            character_pred = label_list.index(character_pred_label)
                            character_preds.append(character_pred)
                character_preds_idx += 1
    character_preds.append(subword_preds[-1])  # [SEP] label
    original_labels = ["O"] + example["original_clean_labels"][: len(character_preds) - 2] + ["O"]
    originals = []
    for label in original_labels:
        originals.append(label_list.index(label))
    assert len(character_preds) == len(originals)
    return character_preds, originals


# --- klue_baseline/data/klue_re.py (KlueREProcessor), the same commit ---

SUBJECT_START_MARKER = "<subj>"
SUBJECT_END_MARKER = "</subj>"
OBJECT_START_MARKER = "<obj>"
OBJECT_END_MARKER = "</obj>"


def mark_entity_spans(text, subject_range, object_range):
    if subject_range < object_range:
        segments = [
            text[: subject_range[0]],
            SUBJECT_START_MARKER,
            text[subject_range[0] : subject_range[1] + 1],
            SUBJECT_END_MARKER,
            text[subject_range[1] + 1 : object_range[0]],
            OBJECT_START_MARKER,
            text[object_range[0] : object_range[1] + 1],
            OBJECT_END_MARKER,
            text[object_range[1] + 1 :],
        ]
    elif subject_range > object_range:
        segments = [
            text[: object_range[0]],
            OBJECT_START_MARKER,
            text[object_range[0] : object_range[1] + 1],
            OBJECT_END_MARKER,
            text[object_range[1] + 1 : subject_range[0]],
            SUBJECT_START_MARKER,
            text[subject_range[0] : subject_range[1] + 1],
            SUBJECT_END_MARKER,
            text[subject_range[1] + 1 :],
        ]
    else:
        raise ValueError("Entity boundaries overlap.")

    marked_text = "".join(segments)

    return marked_text


def fix_tokenization_error(tokenizer, text, tokenizer_type="bert-wp"):
    tokens = tokenizer.tokenize(text)
    if text[text.find(SUBJECT_END_MARKER) + len(SUBJECT_END_MARKER)] != " ":
        space_idx = tokens.index(SUBJECT_END_MARKER) + 1
        if tokenizer_type == "xlm-sp":
            if tokens[space_idx] == "▁":
                tokens.pop(space_idx)
            elif tokens[space_idx].startswith("▁"):
                tokens[space_idx] = tokens[space_idx][1:]
        elif tokenizer_type == "bert-wp":
            if not tokens[space_idx].startswith("##") and "가" <= tokens[space_idx][0] <= "힣":
                tokens[space_idx] = "##" + tokens[space_idx]

    if text[text.find(OBJECT_END_MARKER) + len(OBJECT_END_MARKER)] != " ":
        space_idx = tokens.index(OBJECT_END_MARKER) + 1
        if tokenizer_type == "xlm-sp":
            if tokens[space_idx] == "▁":
                tokens.pop(space_idx)
            elif tokens[space_idx].startswith("▁"):
                tokens[space_idx] = tokens[space_idx][1:]
        elif tokenizer_type == "bert-wp":
            if not tokens[space_idx].startswith("##") and "가" <= tokens[space_idx][0] <= "힣":
                tokens[space_idx] = "##" + tokens[space_idx]

    return tokens
