/* make-font-dataset.c: render a font-classification image set from the
 * Debian CJK fonts: one class per font, one grayscale PNG per character.
 *
 * Each class is a font from the table below (Kai, Ming/Song and Hei designs
 * from the fonts-arphic-* and fonts-wqy-* packages); each image is one of the
 * most common simplified Chinese characters (built-in list of 2000, in
 * frequency order). --chars N takes the first N of them that have a glyph
 * in every chosen font, so every class holds the same characters.
 *
 * Images are SxS, one channel: a white glyph (255) on black (0), the
 * coverage that stb_truetype's anti-aliased rasteriser gives, like MNIST.
 * The glyph's em is scaled to 80% of S, then the glyph's bounding box is
 * centred; with jitter the size varies by up to +-10% and the centre by up
 * to +-jitter*S in x and y (--jitter 0: neither). A glyph that the jitter
 * would push over the image edge is moved back inside by whole pixels, so
 * none is cut (rare at the default 0.06; about 1 in 30 at 0.1, 2 in 3 at
 * 0.25, which piles glyphs up against the edges). The jitter comes from a
 * generator seeded by (seed, font name, code point), so every file is a
 * function of --seed alone, whatever the order or choice of fonts.
 *
 * Output: OUTDIR/<font>/U+XXXX.png (the character's code point in hex).
 * Folders are created as needed; files already there with the same names
 * are replaced, others are left alone. Fonts are looked for under
 * $CLTRAIN_FONT_DIR (default /usr/share/fonts/truetype).
 * Depends on common.h (the inline ct_rng; ct_mkdir_p from libcltrain.a) and
 * the stb headers (libstb-dev).
 * Tested by tests/fonts.sh.
 *
 * Usage: make-font-dataset [--fonts N|LIST] [--chars N] [--size S] [--seed X]
 *                          [--jitter F] OUTDIR
 * Exit status: 0 done, 1 a file could not be read or written, 2 bad usage,
 * a missing font or too few characters. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cltrain/common.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define STB_TRUETYPE_IMPLEMENTATION
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push /* older and newer stb releases warn under -Wextra */
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <stb/stb_truetype.h>
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

#define PROG "make-font-dataset"

typedef struct {
    const char *name;    /* the class name and folder */
    const char *style;   /* for the usage text */
    const char *file;    /* under the font folder */
    int face;            /* index inside a .ttc collection */
    const char *package; /* the Debian package that installs the file */
} font_entry;

/* The first four (four distinct designs: Kai, Ming/Song, two Hei) are the default --fonts 4. */
static const font_entry font_table[] = {
    {"ukai", "Kai", "arphic/ukai.ttc", 0, "fonts-arphic-ukai"},                       /* AR PL UKai CN */
    {"uming", "Ming", "arphic/uming.ttc", 0, "fonts-arphic-uming"},                   /* AR PL UMing CN */
    {"wqy-zenhei", "Hei", "wqy/wqy-zenhei.ttc", 0, "fonts-wqy-zenhei"},               /* WenQuanYi Zen Hei */
    {"wqy-microhei", "Hei", "wqy/wqy-microhei.ttc", 0, "fonts-wqy-microhei"},         /* WenQuanYi Micro Hei (Droid-derived) */
    /* the next ones repeat a design above: Arphic's GB Song is the same design
     * as its Ming (Song and Ming name one style), GB Kai the same as UKai */
    {"gbsn00lp", "Song", "arphic-gbsn00lp/gbsn00lp.ttf", 0, "fonts-arphic-gbsn00lp"}, /* AR PL SungtiL GB */
    {"gkai00mp", "Kai", "arphic-gkai00mp/gkai00mp.ttf", 0, "fonts-arphic-gkai00mp"},  /* AR PL KaitiM GB */
    {"bsmi00lp", "Ming", "arphic-bsmi00lp/bsmi00lp.ttf", 0, "fonts-arphic-bsmi00lp"}, /* AR PL Mingti2L Big5 */
    {"bkai00mp", "Kai", "arphic-bkai00mp/bkai00mp.ttf", 0, "fonts-arphic-bkai00mp"},  /* AR PL KaitiM Big5 */
};
enum { N_FONTS = sizeof font_table / sizeof font_table[0] };

/* The 2000 most common simplified Chinese characters, most frequent first. */
static const char *const common_chars[] = {
    "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于",
    "着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还",
    "进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情",
    "明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或",
    "新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员",
    "解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太",
    "量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基",
    "眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交",
    "规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济",
    "车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调",
    "深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越",
    "器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历",
    "首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维",
    "革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧",
    "黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值",
    "仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印",
    "晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财",
    "环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担",
    "州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养",
    "伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穿艺背阵草脚概恶块顿敢守酒岛托央",
    "户烈洋哥索胡款靠评版宝座释景顾弟登货互付伯慢欧换闻危忙核暗姐介坏讨丽良序升监临亮",
    "露永呼味野架域沙掉括舰鱼杂误湾吉减编楚肯测败屋跑梦散温困剑渐封救贵枪缺楼县尚毫移",
    "娘朋画班智亦耳恩短掌恐遗固席松秘谢鲁遇康虑幸均销钟诗藏赶剧票损忽巨炮旧端探湖录叶",
    "春乡附吸予礼港雨呀板庭妇归睛饭额含顺输摇招婚脱补谓督毒油疗旅泽材灭逐莫笔亡鲜词圣",
    "择寻厂睡博勒烟授诺伦岸奥唐卖俄炸载洛健堂旁宫喝借君禁阴园谋宋避抓荣姑孙逃牙束跳顶",
    "玉镇雪午练迫爷篇肉嘴馆遍凡础洞卷坦牛宁纸诸训私庄祖丝翻暴森塔默握戏隐熟骨访弱蒙歌",
    "店鬼软典欲萨伙遭盘爸扩盖弄雄稳忘亿刺拥徒姆杨齐赛趣曲刀床迎冰虚玩析窗醒妻透购替塞",
    "努休虎扬途侵刑绿兄迅套贸毕唯谷轮库迹尤竞街促延震弃甲伟麻川申缓潜闪售灯针哲络抵朱",
    "埃抱鼓植纯夏忍页杰筑折郑贝尊吴秀混臣雅振染盛怒舞圆搞狂措姓残秋培迷诚宽宇猛摆梅毁",
    "伸摩盟末乃悲拍丁赵硬麦蒋操耶阻订彩抽赞魔纷沿喊违妹浪汇币丰蓝殊献桌啦瓦莱援译夺汽",
    "烧距裁偏符勇触课敬哭懂墙袭召罚侠厅拜巧侧韩冒债曼融惯享戴童犹乘挂奖绍厚纵障讯涉彻",
    "刊丈爆乌役描洗玛患妙镜唱烦签仙彼弗症仿倾牌陷鸟轰咱菜闭奋庆撤泪茶疾缘播朗杜奶季丹",
    "狗尾仪偷奔珠虫驻孔宜艾桥淡翼恨繁寒伴叹旦愈潮粮缩罢聚径恰挑袋灰捕徐珍幕映裂泰隔启",
    "尖忠累炎暂估泛荒偿横拒瑞忆孤鼻闹羊呆厉衡胞零穷舍码赫婆魂灾洪腿胆津俗辩胸晓劲贫仁",
    "偶辑邦恢赖圈摸仰润堆碰艇稍迟辆废净凶署壁御奉旋冬矿抬蛋晨伏吹鸡倍糊秦盾杯租骑乏隆",
    "诊奴摄丧污渡旗甘耐凭扎抢绪粗肩梁幻菲皆碎宙叔岩荡综爬荷悉蒂返井壮薄悄扫敏碍殖详迪",
    "矛霍允幅撒剩凯颗骂赏液番箱贴漫酸郎腰舒眉忧浮辛恋餐吓挺励辞艘键伍峰尺昨黎辈贯侦滑",
    "券崇扰宪绕趋慈乔阅汗枝拖墨胁插箭腊粉泥氏彭拔骗凤慧媒佩愤扑龄驱惜豪掩兼跃尸肃帕驶",
    "堡届欣惠册储飘桑闲惨洁踪勃宾频仇磨递邪撞拟滚奏巡颜剂绩贡疯坡瞧截燃焦殿伪柳锁逼颇",
    "昏劝呈搜勤戒驾漂饮曹朵仔柔俩孟腐幼践籍牧凉牲佳娜浓芳稿竹腹跌逻垂遵脉貌柏狱猜怜惑",
    "陶兽帐饰贷昌叙躺钢沟寄扶铺邓寿惧询汤盗肥尝匆辉奈扣廷澳嘛董迁凝慰厌脏腾幽怨鞋丢埋",
    "泉涌辖躲晋紫艰魏吾慌祝邮吐狠鉴曰械咬邻赤挤弯椅陪割揭韦悟聪雾锋梯猫祥阔誉筹丛牵鸣",
    "沈阁穆屈旨袖猎臂蛇贺柱抛鼠瑟戈牢逊迈欺吨琴衰瓶恼燕仲诱狼池疼卢仗冠粒遥吕玄尘冯抚",
    "浅敦纠钻晶岂峡苍喷耗凌敲菌赔涂粹扁亏寂煤熊恭湿循暖糖赋抑秩帽哀宿踏烂袁侯抖夹昆肝",
    "擦猪炼恒慎搬纽纹玻渔磁铜齿跨押怖漠疲叛遣兹祭醉拳弥斜档稀捷肤疫肿豆削岗晃吞宏癌肚",
    "隶履涨耀扭坛拨沃绘伐堪仆郭牺歼墓雇廉契拼惩捉覆刷劫嫌瓜歇雕闷乳串娃缴唤赢莲霸桃妥",
    "瘦搭赴岳嘉舱俊址庞耕锐缝悔邀玲惟斥宅添挖呵讼氧浩羽斤酷掠妖祸侍乙妨贪挣汪尿莉悬唇",
    "翰仓轨枚盐览傅帅庙芬屏寺胖璃愚滴疏萧姿颤丑劣柯寸扔盯辱匹俱辨饿蜂哦腔郁溃谨糟葛苗",
    "肠忌溜鸿爵鹏鹰笼丘桂滋聊挡纲肌茨壳痕碗穴膀卓贤卧膜毅锦欠哩函茫昂薛皱夸豫胃舌剥傲",
    "拾窝睁携陵哼棉晴铃填饲渴吻扮逆脆喘罩卜炉柴愉绳胎蓄眠竭喂傻慕浑奸扇柜悦拦诞饱乾泡",
};
enum { N_CHARS_MAX = 2000 };

static void usage(FILE *f) {
    fprintf(f,
            "Usage: " PROG " [--fonts N|LIST] [--chars N] [--size S] [--seed X] [--jitter F] OUTDIR\n"
            "Render a font-classification image set: OUTDIR/<font>/U+XXXX.png, one folder per\n"
            "font, one SxS grayscale PNG (white glyph on black) per common Chinese character.\n"
            "  --fonts N     the first N fonts of the list below (default 4: distinct designs)\n"
            "  --fonts LIST  fonts by name, comma-separated (e.g. ukai,uming)\n"
            "  --chars N     characters per font (default 500, at most %d): the most common ones\n"
            "                that have a glyph in every chosen font\n"
            "  --size S      image side in pixels, 8 to 1024 (default 64)\n"
            "  --seed X      random seed (default 1); the same seed writes the same bytes\n"
            "  --jitter F    glyph centre moves by up to +-F*S, size by up to +-10%%;\n"
            "                0 to 0.25 (default 0.06; 0: no jitter)\n"
            "Fonts (under $CLTRAIN_FONT_DIR, default /usr/share/fonts/truetype):\n",
            N_CHARS_MAX);
    for (int i = 0; i < N_FONTS; i++)
        fprintf(f, "  %-13s %-4s  %s (Debian package %s)\n", font_table[i].name, font_table[i].style,
                font_table[i].file, font_table[i].package);
}

/* Code points of common_chars in order; -1 on a malformed string. */
static int decode_chars(uint32_t *out) {
    int n = 0;
    for (size_t l = 0; l < sizeof common_chars / sizeof common_chars[0]; l++)
        for (const unsigned char *p = (const unsigned char *)common_chars[l]; *p;) {
            uint32_t cp;
            int len;
            if (*p < 0x80) cp = *p, len = 1;
            else if ((*p & 0xE0) == 0xC0) cp = *p & 0x1F, len = 2;
            else if ((*p & 0xF0) == 0xE0) cp = *p & 0x0F, len = 3;
            else if ((*p & 0xF8) == 0xF0) cp = *p & 0x07, len = 4;
            else return -1;
            for (int k = 1; k < len; k++) {
                if ((p[k] & 0xC0) != 0x80) return -1;
                cp = cp << 6 | (p[k] & 0x3F);
            }
            if (n == N_CHARS_MAX) return -1;
            out[n++] = cp;
            p += len;
        }
    return n;
}

/* A whole number in [lo, hi], or -1 with a message. */
static long parse_count(const char *opt, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, PROG ": %s '%s': use a whole number from %ld to %ld\n", opt, s, lo, hi);
        return -1;
    }
    return v;
}

/* --fonts N or a comma-separated list of names into table indices; count or -1 with a message. */
static int parse_fonts(const char *s, int *pick) {
    if (s[0] >= '0' && s[0] <= '9') {
        long n = parse_count("--fonts", s, 1, N_FONTS);
        if (n < 0) return -1;
        for (int i = 0; i < n; i++) pick[i] = i;
        return (int)n;
    }
    int n = 0;
    for (const char *p = s;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int found = -1;
        for (int i = 0; i < N_FONTS; i++)
            if (strlen(font_table[i].name) == len && strncmp(font_table[i].name, p, len) == 0) found = i;
        if (found < 0) {
            char known[512];
            size_t k = 0;
            for (int i = 0; i < N_FONTS; i++)
                k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", font_table[i].name);
            fprintf(stderr, PROG ": --fonts: unknown font '%.*s' (known: %s)\n", (int)len, p, known);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (pick[i] == found) {
                fprintf(stderr, PROG ": --fonts: '%s' is named twice\n", font_table[found].name);
                return -1;
            }
        pick[n++] = found;
        if (!end) break;
        p = end;
    }
    return n;
}

typedef struct {
    const font_entry *e;
    unsigned char *data;
    stbtt_fontinfo info;
    uint64_t id; /* seeds the jitter: a hash of the name, so the choice of fonts changes nothing */
} font;

/* Reads and opens one font: 0, 1 (unreadable), or 2 (missing: names the package). */
static int load_font(font *f, const font_entry *e, const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, e->file);
    f->e = e;
    f->id = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *c = e->name; *c; c++) f->id = (f->id ^ (unsigned char)*c) * 0x100000001b3ull;
    FILE *in = fopen(path, "rb");
    if (!in) {
        if (errno == ENOENT) {
            fprintf(stderr, PROG ": %s: missing; install the Debian package %s\n", path, e->package);
            return 2;
        }
        fprintf(stderr, PROG ": %s: cannot open (%s)\n", path, strerror(errno));
        return 1;
    }
    long size = -1;
    if (fseek(in, 0, SEEK_END) == 0) size = ftell(in);
    int bad = size <= 0 || fseek(in, 0, SEEK_SET) != 0;
    f->data = bad ? NULL : malloc((size_t)size);
    bad = bad || !f->data || fread(f->data, 1, (size_t)size, in) != (size_t)size;
    fclose(in);
    if (bad) {
        fprintf(stderr, PROG ": %s: cannot read\n", path);
        return 1;
    }
    int faces = stbtt_GetNumberOfFonts(f->data);
    int off = e->face < faces ? stbtt_GetFontOffsetForIndex(f->data, e->face) : -1;
    if (faces <= 0 || off < 0 || !stbtt_InitFont(&f->info, f->data, off)) {
        fprintf(stderr, PROG ": %s: not a font with a face %d (%d faces)\n", path, e->face, faces);
        return 1;
    }
    return 0;
}

static int has_glyph(const font *f, uint32_t cp) {
    int g = stbtt_FindGlyphIndex(&f->info, (int)cp);
    return g != 0 && !stbtt_IsGlyphEmpty(&f->info, g);
}

/* Draws code point cp of font f into img (S*S bytes, cleared first). */
static void render(unsigned char *img, int S, const font *f, uint32_t cp, uint64_t seed, float jitter,
                   unsigned char *scratch, size_t scratch_size) {
    ct_rng r = ct_rng_make(seed, f->id, cp);
    float u_size = 2 * ct_rng_uniform(&r) - 1, u_x = 2 * ct_rng_uniform(&r) - 1, u_y = 2 * ct_rng_uniform(&r) - 1;
    float size = 0.8f * (float)S * (jitter > 0 ? 1 + 0.1f * u_size : 1);
    float s = stbtt_ScaleForMappingEmToPixels(&f->info, size);
    int g = stbtt_FindGlyphIndex(&f->info, (int)cp), x0, y0, x1, y1;
    memset(img, 0, (size_t)S * S);
    if (!stbtt_GetGlyphBox(&f->info, g, &x0, &y0, &x1, &y1)) return;
    /* origin such that the box centre lands on the (jittered) image centre; y grows down */
    float ox = 0.5f * (float)S + jitter * (float)S * u_x - 0.5f * (float)(x0 + x1) * s;
    float oy = 0.5f * (float)S + jitter * (float)S * u_y + 0.5f * (float)(y0 + y1) * s;
    float fx = floorf(ox), fy = floorf(oy);
    int bx0, by0, bx1, by1;
    stbtt_GetGlyphBitmapBoxSubpixel(&f->info, g, s, s, ox - fx, oy - fy, &bx0, &by0, &bx1, &by1);
    int w = bx1 - bx0, h = by1 - by0;
    if (w <= 0 || h <= 0 || (size_t)w * (size_t)h > scratch_size) return;
    stbtt_MakeGlyphBitmapSubpixel(&f->info, scratch, w, h, w, s, s, ox - fx, oy - fy, g);
    /* where jitter would push the glyph over an edge, whole pixels back inside (when it fits) */
    int left = (int)fx + bx0, top = (int)fy + by0;
    if (w <= S) left = left < 0 ? 0 : left + w > S ? S - w : left;
    if (h <= S) top = top < 0 ? 0 : top + h > S ? S - h : top;
    for (int y = 0; y < h; y++) {
        int iy = top + y;
        if (iy < 0 || iy >= S) continue;
        for (int x = 0; x < w; x++) {
            int ix = left + x;
            if (ix >= 0 && ix < S) img[(size_t)iy * S + ix] = scratch[(size_t)y * w + x];
        }
    }
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"fonts", required_argument, NULL, 'f'}, {"chars", required_argument, NULL, 'c'},
        {"size", required_argument, NULL, 'S'},  {"seed", required_argument, NULL, 's'},
        {"jitter", required_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double t0 = now_s();
    int pick[N_FONTS], n_fonts = 4, o;
    long n_chars = 500, S = 64;
    uint64_t seed = 1;
    float jitter = 0.06f;
    for (int i = 0; i < 4; i++) pick[i] = i;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (o) {
        case 'f': if ((n_fonts = parse_fonts(optarg, pick)) < 0) return 2; break;
        case 'c': if ((n_chars = parse_count("--chars", optarg, 1, N_CHARS_MAX)) < 0) return 2; break;
        case 'S': if ((S = parse_count("--size", optarg, 8, 1024)) < 0) return 2; break;
        case 's': {
            char *end;
            errno = 0;
            seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, PROG ": --seed '%s': use a whole number >= 0\n", optarg);
                return 2;
            }
            break;
        }
        case 'j': {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v >= 0 && v <= 0.25)) {
                fprintf(stderr, PROG ": --jitter '%s': use a number from 0 to 0.25\n", optarg);
                return 2;
            }
            jitter = (float)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        case ':': fprintf(stderr, PROG ": %s needs a value (see --help)\n", argv[optind - 1]); return 2;
        default: fprintf(stderr, PROG ": unknown option '%s' (see --help)\n", argv[optind - 1]); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, PROG ": %s (see --help)\n", optind >= argc ? "missing OUTDIR" : "one OUTDIR only");
        return 2;
    }
    const char *outdir = argv[optind];
    const char *fontdir = getenv("CLTRAIN_FONT_DIR");
    if (!fontdir || !*fontdir) fontdir = "/usr/share/fonts/truetype";

    static uint32_t all[N_CHARS_MAX];
    int n_all = decode_chars(all);
    if (n_all < 0) {
        fprintf(stderr, PROG ": the built-in character list is malformed\n");
        return 1;
    }
    font fonts[N_FONTS];
    memset(fonts, 0, sizeof fonts);
    int rc = 0;
    for (int i = 0; i < n_fonts && !rc; i++) rc = load_font(&fonts[i], &font_table[pick[i]], fontdir);
    /* the first n_chars characters with a glyph in every chosen font */
    static uint32_t chars[N_CHARS_MAX];
    int n = 0;
    for (int k = 0; k < n_all && n < n_chars && !rc; k++) {
        int everywhere = 1;
        for (int i = 0; i < n_fonts && everywhere; i++) everywhere = has_glyph(&fonts[i], all[k]);
        if (everywhere) chars[n++] = all[k];
    }
    if (!rc && n < n_chars) {
        fprintf(stderr, PROG ": --chars %ld: only %d of the %d built-in characters have a glyph in every chosen font\n",
                n_chars, n, n_all);
        rc = 2;
    }
    unsigned char *img = rc ? NULL : malloc((size_t)S * S);
    size_t scratch_size = (size_t)(4 * S) * (size_t)(4 * S); /* a glyph box is far below 4S at 0.88 S per em */
    unsigned char *scratch = rc ? NULL : malloc(scratch_size);
    if (!rc && (!img || !scratch)) {
        fprintf(stderr, PROG ": out of memory for %ldx%ld images\n", S, S);
        rc = 1;
    }
    char path[4200];
    for (int i = 0; i < n_fonts && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", outdir, fonts[i].e->name);
        if (ct_mkdir_p(path) != 0) {
            fprintf(stderr, PROG ": %s: cannot create the folder (%s)\n", path, strerror(errno));
            rc = 1;
            break;
        }
        for (int k = 0; k < n && !rc; k++) {
            render(img, (int)S, &fonts[i], chars[k], seed, jitter, scratch, scratch_size);
            snprintf(path, sizeof path, "%s/%s/U+%04X.png", outdir, fonts[i].e->name, (unsigned)chars[k]);
            if (!stbi_write_png(path, (int)S, (int)S, 1, img, (int)S)) {
                fprintf(stderr, PROG ": %s: cannot write\n", path);
                rc = 1;
            }
        }
    }
    free(img);
    free(scratch);
    for (int i = 0; i < n_fonts; i++) free(fonts[i].data);
    if (rc) return rc;
    printf(PROG ": wrote %s: %d font%s, %d characters, %ld images of %ldx%ld, seed %llu, %.2f s\n", outdir, n_fonts,
           n_fonts == 1 ? "" : "s", n, (long)n_fonts * n, S, S, (unsigned long long)seed, now_s() - t0);
    return 0;
}
